// ShardSamples: storing checked sequences compactly and writing them into padded HostBatch rows.
// append_checked is the one place every format's values are validated against the limits.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "data/shard_decoders.h"

namespace bert {
namespace {

std::string describe(const SequenceRef& ref) {
  if (!ref.packed) return "sample " + std::to_string(ref.row);
  if (ref.sequence < 0) return "row " + std::to_string(ref.row);
  return "row " + std::to_string(ref.row) + ", sequence " + std::to_string(ref.sequence);
}

}  // namespace

void fail_sequence(const SequenceRef& ref, const std::string& key, const std::string& message) {
  fail(Code::data, "shard '", ref.file, "': '", key, "' of ", describe(ref), ": ", message);
}

void append_checked(const SequenceRef& ref, const SequenceView& seq, const ShardLimits& limits, ShardSamples& out) {
  if (seq.tokens < 1) fail_sequence(ref, "input_ids", "the sequence has no tokens");
  if (seq.tokens > limits.max_seq_length) {
    fail_sequence(ref, "input_ids",
                  "the sequence has " + std::to_string(seq.tokens) + " tokens, more than max_seq_length " +
                      std::to_string(limits.max_seq_length));
  }
  for (int64_t t = 0; t < seq.tokens; ++t) {
    const int32_t id = seq.input_ids[t];
    if (id < 0 || id >= limits.vocab_size) {
      fail_sequence(ref, "input_ids",
                    "token id " + std::to_string(id) + " at position " + std::to_string(t) +
                        " is outside the vocabulary [0, " + std::to_string(limits.vocab_size) + ")");
    }
    if (seq.segment_ids[t] != 0 && seq.segment_ids[t] != 1) {
      fail_sequence(
          ref, "segment_ids",
          "value " + std::to_string(seq.segment_ids[t]) + " at position " + std::to_string(t) + " is not 0 or 1");
    }
  }
  if (seq.predictions > limits.max_predictions_per_seq) {
    fail_sequence(ref, "masked_lm_positions",
                  std::to_string(seq.predictions) + " masked positions, more than max_predictions_per_seq " +
                      std::to_string(limits.max_predictions_per_seq));
  }
  for (int64_t p = 0; p < seq.predictions; ++p) {
    const int32_t pos = seq.masked_lm_positions[p];
    if (pos < 1 || pos >= seq.tokens) {
      fail_sequence(ref, "masked_lm_positions",
                    "position " + std::to_string(pos) + " (entry " + std::to_string(p) +
                        ") is out of range: it must lie in [1, " + std::to_string(seq.tokens) +
                        ") (the sequence's real tokens; 0 is [CLS] and marks padding)");
    }
    const int32_t id = seq.masked_lm_ids[p];
    if (id < 0 || id >= limits.vocab_size) {
      fail_sequence(ref, "masked_lm_ids",
                    "token id " + std::to_string(id) + " (entry " + std::to_string(p) +
                        ") is outside the vocabulary [0, " + std::to_string(limits.vocab_size) + ")");
    }
  }
  if (seq.next_sentence_label != 0 && seq.next_sentence_label != 1) {
    fail_sequence(ref, "next_sentence_labels", "value " + std::to_string(seq.next_sentence_label) + " is not 0 or 1");
  }

  const size_t t0 = out.input_ids.size(), n = static_cast<size_t>(seq.tokens);
  out.input_ids.resize(t0 + n);
  out.segment_ids.resize(t0 + n);
  std::memcpy(&out.input_ids[t0], seq.input_ids, n * sizeof(int32_t));
  int8_t* seg = &out.segment_ids[t0];
  for (size_t t = 0; t < n; ++t) seg[t] = static_cast<int8_t>(seq.segment_ids[t]);
  out.token_begin.push_back(static_cast<int64_t>(t0 + n));
  const size_t p0 = out.masked_lm_positions.size(), m = static_cast<size_t>(seq.predictions);
  out.masked_lm_positions.resize(p0 + m);
  out.masked_lm_ids.resize(p0 + m);
  if (m > 0) {
    std::memcpy(&out.masked_lm_positions[p0], seq.masked_lm_positions, m * sizeof(int32_t));
    std::memcpy(&out.masked_lm_ids[p0], seq.masked_lm_ids, m * sizeof(int32_t));
  }
  out.pred_begin.push_back(static_cast<int64_t>(p0 + m));
  out.next_sentence_labels.push_back(static_cast<int8_t>(seq.next_sentence_label));
}

size_t ShardSamples::bytes() const {
  return (token_begin.size() + pred_begin.size()) * sizeof(int64_t) + input_ids.size() * sizeof(int32_t) +
         segment_ids.size() + (masked_lm_positions.size() + masked_lm_ids.size()) * sizeof(int32_t) +
         next_sentence_labels.size();
}

void ShardSamples::copy_to(size_t i, HostBatch& out, int b) const {
  const int S = out.seq_length, P = out.max_predictions;
  const int len = length(i), preds = predictions(i);
  BERT_CHECK(len <= S && preds <= P, Code::internal, "sample of ", len, " tokens / ", preds,
             " predictions does not fit a batch row of ", S, " / ", P);
  const int64_t t0 = token_begin[i], p0 = pred_begin[i];
  int32_t* ids = &out.input_ids[static_cast<size_t>(b) * S];    // [S]
  int32_t* seg = &out.segment_ids[static_cast<size_t>(b) * S];  // [S]
  int32_t* mask = &out.input_mask[static_cast<size_t>(b) * S];  // [S]
  std::memcpy(ids, &input_ids[t0], sizeof(int32_t) * len);
  std::fill(ids + len, ids + S, 0);
  for (int t = 0; t < len; ++t) seg[t] = segment_ids[t0 + t];
  std::fill(seg + len, seg + S, 0);
  std::fill(mask, mask + len, 1);
  std::fill(mask + len, mask + S, 0);
  int32_t* pos = &out.masked_lm_positions[static_cast<size_t>(b) * P];  // [P]
  int32_t* mid = &out.masked_lm_ids[static_cast<size_t>(b) * P];        // [P]
  if (preds > 0) {
    std::memcpy(pos, &masked_lm_positions[p0], sizeof(int32_t) * preds);
    std::memcpy(mid, &masked_lm_ids[p0], sizeof(int32_t) * preds);
  }
  std::fill(pos + preds, pos + P, 0);
  std::fill(mid + preds, mid + P, 0);
  out.next_sentence_labels[b] = next_sentence_labels[i];
}

}  // namespace bert
