// Port of create_instances_from_document / create_masked_lm_predictions / truncate_seq_pair
// working on token ids. The order of random draws follows the reference.
#include "prep/pretraining_instances.h"

#include <algorithm>
#include <cmath>

namespace bert {
namespace {

// A segment under construction: tokens[lo, hi) of a buffer, so truncating from the front or
// back is an index change (create_pretraining_data's del tokens[0] / tokens.pop()).
struct Segment {
  std::vector<int32_t> tokens;
  size_t lo = 0, hi = 0;
  size_t size() const { return hi - lo; }
  void clear() {
    tokens.clear();
    lo = hi = 0;
  }
  void append(const int32_t* begin, const int32_t* end) {
    tokens.insert(tokens.end(), begin, end);
    hi = tokens.size();
  }
};

// Removes tokens from the front or back of the longer segment until both fit.
void truncate_pair(Segment& a, Segment& b, size_t max_tokens, PrepRandom& rng) {
  while (a.size() + b.size() > max_tokens) {
    Segment& longer = a.size() > b.size() ? a : b;
    if (rng.uniform() < 0.5) {
      ++longer.lo;
    } else {
      --longer.hi;
    }
  }
}

// add_masked_instance's buffers, kept across a document's instances.
struct MaskScratch {
  std::vector<uint32_t> cand;                // candidate positions (not [CLS]/[SEP]), ascending
  std::vector<uint32_t> group_begin, order;  // groups of candidates (whole words or single tokens)
  std::vector<std::pair<uint32_t, int32_t>> masked;  // (position, original id)
  std::vector<int32_t> output;
};

void add_masked_instance(const std::vector<int32_t>& tokens, size_t a_length, bool random_next,
                         const InstanceOptions& options, const Vocab& vocab, PrepRandom& rng, MaskScratch& m,
                         InstanceBuffer& out, MaskCounts& counts) {
  // With whole-word masking a "##" piece joins the group of the previous candidate; group g is
  // cand[starts[g] .. starts[g + 1]).
  std::vector<uint32_t>& cand = m.cand;
  std::vector<uint32_t>& starts = m.group_begin;
  std::vector<uint32_t>& order = m.order;
  cand.clear();
  starts.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t t = tokens[i];
    if (t == vocab.cls_id || t == vocab.sep_id) continue;
    if (!(options.whole_word_mask && !cand.empty() && vocab.is_continuation(t))) starts.push_back(static_cast<uint32_t>(cand.size()));
    cand.push_back(static_cast<uint32_t>(i));
  }
  const size_t groups = starts.size();
  starts.push_back(static_cast<uint32_t>(cand.size()));
  order.resize(groups);
  for (size_t g = 0; g < groups; ++g) order[g] = static_cast<uint32_t>(g);
  rng.shuffle(order);
  const auto rounded = static_cast<int64_t>(std::nearbyint(static_cast<double>(tokens.size()) * options.masked_lm_prob));
  const size_t to_predict =
      static_cast<size_t>(std::min<int64_t>(options.max_predictions, std::max<int64_t>(1, rounded)));

  m.masked.clear();
  m.output.assign(tokens.begin(), tokens.end());
  for (uint32_t g : order) {
    if (m.masked.size() >= to_predict) break;
    const size_t size = starts[g + 1] - starts[g];
    if (m.masked.size() + size > to_predict) continue;
    for (uint32_t c = starts[g]; c < starts[g + 1]; ++c) {  // groups never overlap: no index is covered twice
      const uint32_t index = cand[c];
      int32_t replacement;
      if (rng.uniform() < 0.8) {
        replacement = vocab.mask_id;
        ++counts.replaced_mask;
      } else if (rng.uniform() < 0.5) {
        replacement = tokens[index];
        ++counts.kept;
      } else {
        replacement = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab.size())));
        ++counts.random;
      }
      m.output[index] = replacement;
      m.masked.emplace_back(index, tokens[index]);
    }
  }
  std::sort(m.masked.begin(), m.masked.end());
  counts.masked += m.masked.size();

  out.input_ids.insert(out.input_ids.end(), m.output.begin(), m.output.end());
  out.token_offsets.push_back(out.input_ids.size());
  out.segment_a_length.push_back(static_cast<uint16_t>(a_length));
  for (const auto& [pos, label] : m.masked) {
    out.positions.push_back(static_cast<int32_t>(pos));
    out.labels.push_back(label);
  }
  out.mask_offsets.push_back(out.positions.size());
  out.random_next.push_back(random_next ? 1 : 0);
}

}  // namespace

void create_instances_from_document(const std::vector<TokenizedDocument>& docs, size_t doc_index,
                                    const InstanceOptions& options, const Vocab& vocab, PrepRandom& rng,
                                    InstanceBuffer& out, MaskCounts& counts) {
  const TokenizedDocument& doc = docs[doc_index];
  const auto max_num_tokens = static_cast<size_t>(options.max_seq_length - 3);  // [CLS] A [SEP] B [SEP]
  size_t target_length = max_num_tokens;
  if (rng.uniform() < options.short_seq_prob) {
    target_length = static_cast<size_t>(rng.randint(2, static_cast<int64_t>(max_num_tokens)));
  }

  std::vector<size_t> chunk;  // sentence indices of the current chunk
  size_t chunk_length = 0;
  Segment a, b;
  std::vector<int32_t> tokens;
  MaskScratch scratch;
  const auto n_sentences = static_cast<int64_t>(doc.sentences());
  for (int64_t i = 0; i < n_sentences; ++i) {
    const auto si = static_cast<size_t>(i);
    chunk.push_back(si);
    chunk_length += doc.sentence_ends[si] - doc.sentence_begin(si);
    if (i != n_sentences - 1 && chunk_length < target_length) continue;

    size_t a_end = 1;
    if (chunk.size() >= 2) a_end = static_cast<size_t>(rng.randint(1, static_cast<int64_t>(chunk.size()) - 1));
    a.clear();
    b.clear();
    for (size_t j = 0; j < a_end; ++j) {
      a.append(doc.tokens.data() + doc.sentence_begin(chunk[j]), doc.tokens.data() + doc.sentence_ends[chunk[j]]);
    }
    bool random_next = false;
    if (chunk.size() == 1 || rng.uniform() < 0.5) {
      random_next = true;
      const size_t target_b = target_length > a.size() ? target_length - a.size() : 0;
      size_t other = doc_index;
      for (int attempt = 0; attempt < 10; ++attempt) {
        other = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(docs.size()) - 1));
        if (other != doc_index) break;
      }
      const TokenizedDocument& rdoc = docs[other];
      auto start = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(rdoc.sentences()) - 1));
      for (size_t j = start; j < rdoc.sentences(); ++j) {
        b.append(rdoc.tokens.data() + rdoc.sentence_begin(j), rdoc.tokens.data() + rdoc.sentence_ends[j]);
        if (b.size() >= target_b) break;
      }
      i -= static_cast<int64_t>(chunk.size() - a_end);  // put the unused sentences back
    } else {
      for (size_t j = a_end; j < chunk.size(); ++j) {
        b.append(doc.tokens.data() + doc.sentence_begin(chunk[j]), doc.tokens.data() + doc.sentence_ends[chunk[j]]);
      }
    }
    truncate_pair(a, b, max_num_tokens, rng);

    tokens.clear();
    tokens.push_back(vocab.cls_id);
    tokens.insert(tokens.end(), a.tokens.begin() + static_cast<std::ptrdiff_t>(a.lo),
                  a.tokens.begin() + static_cast<std::ptrdiff_t>(a.hi));
    tokens.push_back(vocab.sep_id);
    tokens.insert(tokens.end(), b.tokens.begin() + static_cast<std::ptrdiff_t>(b.lo),
                  b.tokens.begin() + static_cast<std::ptrdiff_t>(b.hi));
    tokens.push_back(vocab.sep_id);
    add_masked_instance(tokens, a.size() + 2, random_next, options, vocab, rng, scratch, out, counts);

    chunk.clear();
    chunk_length = 0;
  }
}

}  // namespace bert
