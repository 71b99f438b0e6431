// Word counting (threads over document ranges) and the incremental pair-merge loop: pair counts
// are updated only for the words that contain the merged pair, and a max-heap with lazy
// invalidation picks the next most frequent pair (ties: the smaller pair of symbol ids).
#include "prep/vocab_trainer.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "prep/progress.h"
#include "prep/text_corpus.h"
#include "prep/work_queue.h"
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
  const int threads = resolve_threads(o.threads);
  std::vector<WordCounts> partial(static_cast<size_t>(threads));
  std::vector<TokenizeCounts> stats(static_cast<size_t>(threads));
  run_workers(threads, docs.size(), 64, [&](size_t id, BlockQueue& queue) {
    DocumentReader reader(files);
    std::string text, bytes;
    std::vector<uint32_t> ends;
    WordCounts& counts = partial[id];
    for (size_t first, last; queue.next(first, last);) {
      for (size_t i = first; i < last; ++i) {
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
  });
  sum.count_seconds = progress.finish();
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

// Entries most frequent first, ties by key: the deterministic order of words and characters.
std::vector<std::pair<std::string, uint64_t>> by_count(const WordCounts& counts) {
  std::vector<std::pair<std::string, uint64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& x, const auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  return sorted;
}

// Each word's characters (UTF-8 pieces); a word of more than max_chars characters gets none.
std::vector<std::vector<std::string>> word_characters(const std::vector<std::pair<std::string, uint64_t>>& words,
                                                      int max_chars) {
  std::vector<std::vector<std::string>> chars(words.size());
  for (size_t w = 0; w < words.size(); ++w) {
    const std::string& s = words[w].first;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    for (size_t i = 0; i < s.size();) {
      size_t begin = i;
      bool bad = false;
      decode_utf8(p, s.size(), i, &bad);
      chars[w].emplace_back(s.substr(begin, i - begin));
    }
    if (chars[w].size() > static_cast<size_t>(max_chars)) chars[w].clear();
  }
  return chars;
}

// Token texts by symbol id, and their ids.
struct Symbols {
  std::vector<std::string> text;
  std::unordered_map<std::string, int32_t> id;
  // The id of `token`, added when new (second: whether it was).
  std::pair<int32_t, bool> add(const std::string& token) {
    auto [it, inserted] = id.emplace(token, static_cast<int32_t>(text.size()));
    if (inserted) text.push_back(token);
    return {it->second, inserted};
  }
};

// Adds the `limit` most frequent characters as symbols, then their "##" forms; returns how many
// characters that is.
size_t add_alphabet(const std::vector<std::pair<std::string, uint64_t>>& words,
                    const std::vector<std::vector<std::string>>& chars, size_t limit, Symbols& symbols) {
  WordCounts char_freq;
  for (size_t w = 0; w < words.size(); ++w) {
    for (const std::string& c : chars[w]) char_freq[c] += words[w].second;
  }
  std::vector<std::pair<std::string, uint64_t>> alphabet = by_count(char_freq);
  alphabet.resize(std::min(alphabet.size(), limit));
  for (const auto& [c, f] : alphabet) symbols.add(c);
  for (const auto& [c, f] : alphabet) symbols.add("##" + c);
  return alphabet.size();
}

// The words still being merged: symbol sequences of two or more symbols, with their counts.
struct SymbolWords {
  std::vector<std::vector<int32_t>> seqs;
  std::vector<uint64_t> freq;
};

// Each word as its first character's symbol then "##" symbols; words with a character outside
// the alphabet, or of one character, are left out.
SymbolWords symbol_words(const std::vector<std::pair<std::string, uint64_t>>& words,
                         const std::vector<std::vector<std::string>>& chars, const Symbols& symbols) {
  SymbolWords out;
  for (size_t w = 0; w < words.size(); ++w) {
    if (chars[w].empty()) continue;
    std::vector<int32_t> seq;
    for (size_t k = 0; k < chars[w].size(); ++k) {
      auto it = symbols.id.find(k == 0 ? chars[w][k] : "##" + chars[w][k]);
      if (it == symbols.id.end()) {
        seq.clear();
        break;
      }
      seq.push_back(it->second);
    }
    if (seq.size() >= 2) {
      out.seqs.push_back(std::move(seq));
      out.freq.push_back(words[w].second);
    }
  }
  return out;
}

struct HeapEntry {
  uint64_t count;
  uint64_t pair;
  bool operator<(const HeapEntry& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

// Adjacent-pair counts over the words, the words each pair occurs in, and a max-heap of counts
// whose stale entries are skipped when popped.
class PairCounts {
 public:
  explicit PairCounts(const SymbolWords& words) : words_(words) {
    for (uint32_t w = 0; w < words.seqs.size(); ++w) {
      for (size_t i = 0; i + 1 < words.seqs[w].size(); ++i) add(pair_key(words.seqs[w][i], words.seqs[w][i + 1]), w);
    }
    for (const auto& [key, c] : count_) heap_.push({c, key});
    touched_.clear();
  }

  // The most frequent pair and its count; false when no pair is left.
  bool top(HeapEntry& best) {
    while (!heap_.empty()) {
      best = heap_.top();
      heap_.pop();
      auto it = count_.find(best.pair);
      const uint64_t actual = it == count_.end() ? 0 : it->second;
      if (actual == best.count) return true;
      if (actual > 0) heap_.push({actual, best.pair});
    }
    return false;
  }
  // Takes the words pair occurs in, forgetting the pair.
  std::vector<uint32_t> take(uint64_t pair) {
    std::vector<uint32_t> where = std::move(words_of_[pair]);
    words_of_.erase(pair);
    return where;
  }
  void add(uint64_t key, uint32_t w) {
    count_[key] += words_.freq[w];
    words_of_[key].push_back(w);
    touched_.push_back(key);
  }
  void remove(uint64_t key, uint32_t w) { count_[key] -= words_.freq[w]; }
  // After a merge: drops the merged pair and queues the new counts of the pairs it created.
  void finish_merge(uint64_t merged) {
    count_.erase(merged);
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (uint64_t key : touched_) {
      const uint64_t cnt = count_[key];
      if (cnt > 0) heap_.push({cnt, key});
    }
    touched_.clear();
  }

 private:
  const SymbolWords& words_;
  std::unordered_map<uint64_t, uint64_t> count_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> words_of_;
  std::priority_queue<HeapEntry> heap_;
  std::vector<uint64_t> touched_;
};

// Replaces each a b in word w by c, moving the counts of the pairs around it.
void merge_in_word(std::vector<int32_t>& s, int32_t a, int32_t b, int32_t c, uint32_t w, PairCounts& pairs) {
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != a || s[i + 1] != b) continue;
    if (i > 0) {
      pairs.remove(pair_key(s[i - 1], a), w);
      pairs.add(pair_key(s[i - 1], c), w);
    }
    if (i + 2 < s.size()) {
      pairs.remove(pair_key(b, s[i + 2]), w);
      pairs.add(pair_key(c, s[i + 2]), w);
    }
    pairs.remove(pair_key(a, b), w);
    s[i] = c;
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
}

// Merges the most frequent pair until `target` new tokens exist or no pair is seen
// min_frequency times; returns the new tokens in merge order.
std::vector<std::string> merge_pairs(SymbolWords& words, Symbols& symbols, size_t target, uint64_t min_frequency) {
  PairCounts pairs(words);
  std::vector<std::string> merged;
  std::vector<uint32_t> stamp(words.seqs.size(), 0);
  uint32_t merge_no = 0;
  HeapEntry best;
  while (merged.size() < target && pairs.top(best)) {
    if (best.count < min_frequency) break;
    const auto a = static_cast<int32_t>(best.pair >> 32), b = static_cast<int32_t>(best.pair & 0xFFFFFFFFu);
    const std::string& tb = symbols.text[static_cast<size_t>(b)];
    auto [c, is_new] = symbols.add(symbols.text[static_cast<size_t>(a)] + tb.substr(2));
    if (is_new) merged.push_back(symbols.text[static_cast<size_t>(c)]);
    ++merge_no;
    for (uint32_t w : pairs.take(best.pair)) {
      if (stamp[w] == merge_no) continue;
      stamp[w] = merge_no;
      merge_in_word(words.seqs[w], a, b, c, w, pairs);
    }
    pairs.finish_merge(best.pair);
  }
  return merged;
}

// BERT's layout: [PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK], the alphabet's characters
// and their ## forms, the merged tokens, then [unusedN] fillers up to vocab_size.
std::vector<std::string> bert_layout(const Symbols& symbols, size_t alphabet, const std::vector<std::string>& merged,
                                     size_t vocab_size, VocabTrainSummary& sum) {
  std::vector<std::string> vocab;
  vocab.reserve(vocab_size);
  vocab.push_back("[PAD]");
  for (int i = 0; i < 99; ++i) vocab.push_back("[unused" + std::to_string(i) + "]");
  for (const char* s : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) vocab.push_back(s);
  for (size_t i = 0; i < symbols.text.size() && vocab.size() < vocab_size; ++i) {
    if (i < 2 * alphabet) vocab.push_back(symbols.text[i]);
  }
  for (const std::string& t : merged) vocab.push_back(t);
  for (int k = 99; vocab.size() < vocab_size; ++k) {
    vocab.push_back("[unused" + std::to_string(k) + "]");
    ++sum.unused_filled;
  }
  return vocab;
}

}  // namespace

std::vector<std::string> train_wordpiece_vocab(const VocabTrainOptions& o, VocabTrainSummary& sum) {
  if (o.vocab_size < kMinVocabSize) {
    fail(Code::invalid_argument, "vocabulary size ", o.vocab_size, " is too small (at least ", kMinVocabSize, ")");
  }
  std::vector<std::pair<std::string, uint64_t>> words;
  {
    const WordCounts counted = count_words(o, sum);
    if (counted.empty()) fail(Code::data, "the input holds no words to learn a vocabulary from");
    words = by_count(counted);
  }
  Progress progress("vocab: merging", 0);
  Symbols symbols;
  SymbolWords merging;
  {  // the characters are needed until the words are symbol sequences, the words not after
    const std::vector<std::vector<std::string>> chars = word_characters(words, o.max_word_chars);
    sum.alphabet = add_alphabet(words, chars, std::min(o.limit_alphabet, (o.vocab_size - kReservedIds) / 2), symbols);
    merging = symbol_words(words, chars, symbols);
    words = {};
  }
  const std::vector<std::string> merged =
      merge_pairs(merging, symbols, o.vocab_size - kReservedIds - symbols.text.size(), o.min_frequency);
  sum.merges = merged.size();
  sum.merge_seconds = progress.finish();
  return bert_layout(symbols, sum.alphabet, merged, o.vocab_size, sum);
}

}  // namespace bert
