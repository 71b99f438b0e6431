// Word counting (threads over document ranges) and the incremental pair-merge loop: pair counts
// are updated only for the words that contain the merged pair, and a max-heap with lazy
// invalidation picks the next most frequent pair (ties: the smaller pair of symbol ids).
#include "prep/vocab_trainer.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "prep/progress.h"
#include "prep/text_corpus.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace bert {
namespace {

constexpr size_t kReservedIds = 104;  // [PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK]

using WordCounts = std::unordered_map<std::string, uint64_t>;

WordCounts count_words(const VocabTrainOptions& o, VocabTrainSummary& sum) {
  const std::vector<CorpusFile> files = list_corpus_files(o.inputs);
  sum.files = files.size();
  const std::vector<DocumentRange> docs = index_documents(files, DocumentMode::blank_line);
  uint64_t total = 0;
  for (const DocumentRange& d : docs) total += d.end - d.begin;
  Progress progress("vocab: counting words", total);
  const BasicTokenizer basic(o.lower_case);
  const int threads = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<WordCounts> partial(static_cast<size_t>(threads));
  std::vector<TokenizeCounts> stats(static_cast<size_t>(threads));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&](size_t id) {
    try {
      DocumentReader reader(files);
      std::string text, bytes;
      std::vector<uint32_t> ends;
      WordCounts& counts = partial[id];
      constexpr size_t kBlock = 64;
      for (size_t first; !failed && (first = next.fetch_add(kBlock)) < docs.size();) {
        for (size_t i = first; i < std::min(first + kBlock, docs.size()); ++i) {
          reader.read(docs[i], text);
          basic.split(text, bytes, ends, &stats[id]);
          uint32_t begin = 0;
          for (uint32_t end : ends) {
            ++counts[bytes.substr(begin, end - begin)];
            begin = end;
          }
          progress.add(docs[i].end - docs[i].begin, 1);
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, static_cast<size_t>(t));
  for (std::thread& th : pool) th.join();
  sum.count_seconds = progress.finish();
  if (error) std::rethrow_exception(error);
  WordCounts all = std::move(partial[0]);
  for (size_t t = 1; t < partial.size(); ++t) {
    for (auto& [w, c] : partial[t]) all[w] += c;
  }
  for (const TokenizeCounts& s : stats) {
    sum.bytes += s.bytes;
    sum.words += s.words;
    sum.invalid_utf8 += s.invalid_utf8;
  }
  sum.distinct_words = all.size();
  return all;
}

struct HeapEntry {
  uint64_t count;
  uint64_t pair;
  bool operator<(const HeapEntry& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

}  // namespace

std::vector<std::string> train_wordpiece_vocab(const VocabTrainOptions& o, VocabTrainSummary& sum) {
  if (o.vocab_size < kMinVocabSize) {
    fail(Code::invalid_argument, "vocabulary size ", o.vocab_size, " is too small (at least ", kMinVocabSize, ")");
  }
  WordCounts counted = count_words(o, sum);
  if (counted.empty()) fail(Code::data, "the input holds no words to learn a vocabulary from");

  // Words in a deterministic order, split into code points.
  std::vector<std::pair<std::string, uint64_t>> words(counted.begin(), counted.end());
  counted.clear();
  std::sort(words.begin(), words.end(),
            [](const auto& x, const auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  Progress progress("vocab: merging", 0);
  std::vector<std::vector<std::string>> chars(words.size());
  std::unordered_map<std::string, uint64_t> char_freq;
  for (size_t w = 0; w < words.size(); ++w) {
    const std::string& s = words[w].first;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t i = 0;
    while (i < s.size()) {
      size_t begin = i;
      bool bad = false;
      decode_utf8(p, s.size(), i, &bad);
      chars[w].emplace_back(s.substr(begin, i - begin));
    }
    if (chars[w].size() > static_cast<size_t>(o.max_word_chars)) {
      chars[w].clear();
      continue;
    }
    for (const std::string& c : chars[w]) char_freq[c] += words[w].second;
  }
  std::vector<std::pair<std::string, uint64_t>> alphabet(char_freq.begin(), char_freq.end());
  std::sort(alphabet.begin(), alphabet.end(),
            [](const auto& x, const auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  alphabet.resize(std::min({alphabet.size(), o.limit_alphabet, (o.vocab_size - kReservedIds) / 2}));
  sum.alphabet = alphabet.size();

  std::vector<std::string> symbols;  // symbol id -> token text
  std::unordered_map<std::string, int32_t> symbol_id;
  auto add_symbol = [&](const std::string& text) {
    auto [it, inserted] = symbol_id.emplace(text, static_cast<int32_t>(symbols.size()));
    if (inserted) symbols.push_back(text);
    return std::make_pair(it->second, inserted);
  };
  for (const auto& [c, f] : alphabet) add_symbol(c);
  for (const auto& [c, f] : alphabet) add_symbol("##" + c);

  std::vector<std::vector<int32_t>> seqs;
  std::vector<uint64_t> freq;
  for (size_t w = 0; w < words.size(); ++w) {
    if (chars[w].empty()) continue;
    std::vector<int32_t> seq;
    for (size_t k = 0; k < chars[w].size(); ++k) {
      auto it = symbol_id.find(k == 0 ? chars[w][k] : "##" + chars[w][k]);
      if (it == symbol_id.end()) {
        seq.clear();
        break;
      }
      seq.push_back(it->second);
    }
    if (seq.size() >= 2) {
      seqs.push_back(std::move(seq));
      freq.push_back(words[w].second);
    }
  }
  chars.clear();
  words.clear();

  std::unordered_map<uint64_t, uint64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> pair_words;
  for (uint32_t w = 0; w < seqs.size(); ++w) {
    for (size_t i = 0; i + 1 < seqs[w].size(); ++i) {
      uint64_t key = pair_key(seqs[w][i], seqs[w][i + 1]);
      pair_count[key] += freq[w];
      pair_words[key].push_back(w);
    }
  }
  std::priority_queue<HeapEntry> heap;
  for (const auto& [key, c] : pair_count) heap.push({c, key});

  std::vector<std::string> merged;  // new tokens in merge order
  const size_t target_merges = o.vocab_size - kReservedIds - symbols.size();
  std::vector<uint32_t> stamp(seqs.size(), 0);
  std::vector<uint64_t> touched;
  uint32_t merge_no = 0;
  while (merged.size() < target_merges && !heap.empty()) {
    HeapEntry top = heap.top();
    heap.pop();
    auto it = pair_count.find(top.pair);
    const uint64_t actual = it == pair_count.end() ? 0 : it->second;
    if (actual != top.count) {
      if (actual > 0) heap.push({actual, top.pair});
      continue;
    }
    if (top.count < o.min_frequency) break;
    const auto a = static_cast<int32_t>(top.pair >> 32), b = static_cast<int32_t>(top.pair & 0xFFFFFFFFu);
    const std::string& tb = symbols[static_cast<size_t>(b)];
    auto [c, is_new] = add_symbol(symbols[static_cast<size_t>(a)] + tb.substr(2));
    if (is_new) merged.push_back(symbols[static_cast<size_t>(c)]);
    ++merge_no;
    touched.clear();
    auto change = [&](int32_t x, int32_t y, uint32_t w, bool add) {
      uint64_t key = pair_key(x, y);
      if (add) {
        pair_count[key] += freq[w];
        pair_words[key].push_back(w);
        touched.push_back(key);
      } else {
        pair_count[key] -= freq[w];
      }
    };
    std::vector<uint32_t> where = std::move(pair_words[top.pair]);
    pair_words.erase(top.pair);
    for (uint32_t w : where) {
      if (stamp[w] == merge_no) continue;
      stamp[w] = merge_no;
      std::vector<int32_t>& s = seqs[w];
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        if (s[i] != a || s[i + 1] != b) continue;
        if (i > 0) {
          change(s[i - 1], a, w, false);
          change(s[i - 1], c, w, true);
        }
        if (i + 2 < s.size()) {
          change(b, s[i + 2], w, false);
          change(c, s[i + 2], w, true);
        }
        change(a, b, w, false);
        s[i] = c;
        s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      }
    }
    pair_count.erase(top.pair);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t key : touched) {
      const uint64_t cnt = pair_count[key];
      if (cnt > 0) heap.push({cnt, key});
    }
  }
  sum.merges = merged.size();
  sum.merge_seconds = progress.finish();

  std::vector<std::string> vocab;
  vocab.reserve(o.vocab_size);
  vocab.push_back("[PAD]");
  for (int i = 0; i < 99; ++i) vocab.push_back("[unused" + std::to_string(i) + "]");
  for (const char* s : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) vocab.push_back(s);
  for (size_t i = 0; i < symbols.size() && vocab.size() < o.vocab_size; ++i) {
    if (i < 2 * alphabet.size()) vocab.push_back(symbols[i]);
  }
  for (const std::string& t : merged) vocab.push_back(t);
  for (int k = 99; vocab.size() < o.vocab_size; ++k) {
    vocab.push_back("[unused" + std::to_string(k) + "]");
    ++sum.unused_filled;
  }
  return vocab;
}

}  // namespace bert
