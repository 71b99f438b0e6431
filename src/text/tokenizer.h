// WordPiece tokenizer with exactly the rules of Google BERT's FullTokenizer (tokenization.py):
// clean text (drop NUL, U+FFFD, Cc/Cf; whitespace to space), pad CJK ideographs, split on
// whitespace, for uncased vocabularies lower-case + NFD + strip Mn, split punctuation, then
// greedy longest-match-first WordPiece with "##" continuations and [UNK] for unmatched or long
// words. Unicode data comes from utf8proc. Encoding is const and safe from many threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace bert {

struct TokenizerOptions {
  bool lower_case = true;    // uncased vocabularies: lower-case, NFD, strip accents
  int max_word_chars = 100;  // longer words become [UNK] (Google's code uses 200, HF 100)
};

struct TokenizeCounts {
  uint64_t bytes = 0;         // input bytes seen
  uint64_t invalid_utf8 = 0;  // invalid byte sequences replaced (and then dropped as U+FFFD)
  uint64_t words = 0;         // words after basic tokenization
  uint64_t tokens = 0;        // word pieces produced
  uint64_t unknown = 0;       // words that became [UNK]

  void add(const TokenizeCounts& o) {
    bytes += o.bytes;
    invalid_utf8 += o.invalid_utf8;
    words += o.words;
    tokens += o.tokens;
    unknown += o.unknown;
  }
};

// Basic tokenization: text -> words (punctuation split, cased or lower-cased as configured).
// Words are written into `bytes` and delimited by `ends` (end offset of each word); both are
// cleared first so callers reuse their buffers.
class BasicTokenizer {
 public:
  explicit BasicTokenizer(bool lower_case) : lower_case_(lower_case) {}
  void split(std::string_view text, std::string& bytes, std::vector<uint32_t>& ends,
             TokenizeCounts* counts) const;
  bool lower_case() const { return lower_case_; }

 private:
  struct UnicodeBuffers;
  // Unicode path for one whitespace-delimited run: appends its words to `out`, word ends
  // (offset `base` + position in out) to `ends`.
  void emit_general_run(const char32_t* run, size_t n, UnicodeBuffers& buffers, std::string& out,
                        std::vector<uint32_t>& ends, size_t base) const;
  // The Unicode path's words of `count` code points written into `bytes` at `len` (growing it to
  // keep `slack` bytes free after them); returns the new length.
  size_t append_unicode(const char32_t* run, size_t count, UnicodeBuffers& buffers, std::string& bytes, size_t len,
                        size_t slack, std::vector<uint32_t>& ends) const;
  // Redoes the run text[begin, end) on the Unicode path: its words replace those the ASCII path
  // wrote from output length len_mark and word count ends_mark on; returns the new length.
  size_t redo_run(const unsigned char* text, size_t begin, size_t end, size_t len_mark, size_t ends_mark,
                  UnicodeBuffers& buffers, std::string& bytes, size_t slack, std::vector<uint32_t>& ends) const;
  bool lower_case_;
};

class Tokenizer {
 public:
  Tokenizer(const Vocab& vocab, TokenizerOptions options);

  // Appends the ids of `text` to `ids`; `counts` (optional) accumulates statistics.
  void encode(std::string_view text, std::vector<int32_t>& ids, TokenizeCounts* counts = nullptr) const;
  // WordPiece of one basic word (UTF-8); appends ids, returns false if it became [UNK].
  bool wordpiece(const char* word, size_t length, std::vector<int32_t>& ids) const;

  const Vocab& vocab() const { return vocab_; }
  const TokenizerOptions& options() const { return options_; }
  const BasicTokenizer& basic() const { return basic_; }

 private:
  const Vocab& vocab_;
  TokenizerOptions options_;
  BasicTokenizer basic_;
};

}  // namespace bert
