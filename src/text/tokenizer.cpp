// BERT basic tokenization and WordPiece. Pure-ASCII whitespace runs (most text) take a
// table-driven fast path; a run with any other character is decoded and goes through the
// Unicode path (utf8proc categories, lower-casing with Python's final-sigma rule, NFD with
// canonical ordering, Mn stripping), which reproduces Python's str.lower/unicodedata results.
#include "text/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "text/utf8.h"

namespace bert {
namespace {

enum CharKind : uint8_t { kOther = 0, kDrop = 1, kSpace = 2, kPunct = 3, kCjk = 4 };

constexpr std::array<uint8_t, 128> make_ascii_kinds() {
  std::array<uint8_t, 128> k{};
  for (int c = 0; c < 128; ++c) {
    if (c == '\t' || c == '\n' || c == '\r' || c == ' ') {
      k[c] = kSpace;
    } else if (c < 32 || c == 127) {
      k[c] = kDrop;
    } else if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) {
      k[c] = kPunct;
    } else {
      k[c] = kOther;
    }
  }
  return k;
}
constexpr std::array<uint8_t, 128> kAsciiKind = make_ascii_kinds();

constexpr std::array<char, 128> make_ascii_lower() {
  std::array<char, 128> t{};
  for (int c = 0; c < 128; ++c) t[c] = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return t;
}
constexpr std::array<char, 128> kAsciiLower = make_ascii_lower();

bool is_cjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

utf8proc_category_t category(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }

// Kind of a code point for cleaning and splitting. U+2028/U+2029 survive the reference's
// cleaning but Python's str.split() splits on them, so they separate words too.
CharKind classify(char32_t cp) {
  if (cp < 128) return static_cast<CharKind>(kAsciiKind[cp]);
  if (cp == kReplacementChar) return kDrop;
  if (is_cjk(cp)) return kCjk;
  utf8proc_category_t cat = category(cp);
  if (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF) return kDrop;
  if (cat == UTF8PROC_CATEGORY_ZS || cp == 0x2028 || cp == 0x2029) return kSpace;
  return kOther;
}

bool is_punctuation(char32_t cp) {
  if (cp < 128) return kAsciiKind[cp] == kPunct;
  utf8proc_category_t cat = category(cp);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

// Other_Lowercase and Other_Uppercase of Unicode's PropList.txt (letters and symbols that are
// cased without being Lu/Ll/Lt, such as U+00AA or U+24B6): utf8proc does not expose them.
constexpr char32_t kOtherCased[][2] = {
    {0x00AA, 0x00AA}, {0x00BA, 0x00BA}, {0x02B0, 0x02B8}, {0x02C0, 0x02C1}, {0x02E0, 0x02E4},
    {0x0345, 0x0345}, {0x037A, 0x037A}, {0x10FC, 0x10FC}, {0x1D2C, 0x1D6A}, {0x1D78, 0x1D78},
    {0x1D9B, 0x1DBF}, {0x2071, 0x2071}, {0x207F, 0x207F}, {0x2090, 0x209C}, {0x2160, 0x217F},
    {0x24B6, 0x24E9}, {0x2C7C, 0x2C7D}, {0xA69C, 0xA69D}, {0xA770, 0xA770}, {0xA7F2, 0xA7F4},
    {0xA7F8, 0xA7F9}, {0xAB5C, 0xAB5F}, {0xAB69, 0xAB69}, {0x10780, 0x10780}, {0x10783, 0x10785},
    {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x1E030, 0x1E06D}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169},
    {0x1F170, 0x1F189},
};

bool is_cased(char32_t cp) {
  for (const auto& r : kOtherCased) {
    if (cp >= r[0] && cp <= r[1]) return true;
  }
  utf8proc_category_t cat = category(cp);
  if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return true;
  auto c = static_cast<utf8proc_int32_t>(cp);
  return utf8proc_tolower(c) != c || utf8proc_toupper(c) != c;
}

bool is_case_ignorable(char32_t cp) {
  switch (cp) {  // Word_Break MidLetter / MidNumLet / Single_Quote
    case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4: case 0x2018:
    case 0x2019: case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55: case 0xFF07:
    case 0xFF0E: case 0xFF1A:
      return true;
    default:
      break;
  }
  utf8proc_category_t cat = category(cp);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK;
}

// Python's str.lower() maps U+03A3 to final sigma when a cased letter precedes it (skipping
// case-ignorable characters) and none follows.
bool is_final_sigma(const char32_t* run, size_t n, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(run[j - 1])) --j;
  if (j == 0 || !is_cased(run[j - 1])) return false;
  for (j = i + 1; j < n && is_case_ignorable(run[j]); ++j) {
  }
  return j == n || !is_cased(run[j]);
}

int combining_class(char32_t cp) {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class;
}

// Canonical decomposition (NFD) of `in` into `out`, with canonical ordering of marks.
void nfd(const std::u32string& in, std::u32string& out) {
  out.clear();
  utf8proc_int32_t buf[32];
  for (char32_t c : in) {
    if (c < 0xC0) {
      out.push_back(c);
      continue;
    }
    utf8proc_ssize_t m = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32, UTF8PROC_DECOMPOSE, nullptr);
    if (m <= 0 || m > 32) {
      out.push_back(c);
      continue;
    }
    for (utf8proc_ssize_t k = 0; k < m; ++k) out.push_back(static_cast<char32_t>(buf[k]));
  }
  for (size_t i = 1; i < out.size(); ++i) {  // stable insertion sort of each run of non-starters
    int cc = combining_class(out[i]);
    if (cc == 0) continue;
    size_t j = i;
    char32_t c = out[i];
    while (j > 0) {
      int prev = combining_class(out[j - 1]);
      if (prev == 0 || prev <= cc) break;
      out[j] = out[j - 1];
      --j;
    }
    out[j] = c;
  }
}

}  // namespace

// The Unicode path's buffers, kept across the runs of one split (they allocate only once a run
// leaves ASCII).
struct BasicTokenizer::UnicodeBuffers {
  std::u32string run, lowered, decomposed;
  std::string general;
};

void BasicTokenizer::emit_general_run(const char32_t* run, size_t n, UnicodeBuffers& buffers, std::string& out,
                                      std::vector<uint32_t>& ends, size_t base) const {
  const char32_t* chars = run;
  size_t count = n;
  if (lower_case_) {
    std::u32string& lowered = buffers.lowered;
    lowered.clear();
    for (size_t i = 0; i < n; ++i) {
      char32_t c = run[i];
      if (c == 0x3A3) {
        lowered.push_back(is_final_sigma(run, n, i) ? 0x3C2 : 0x3C3);
      } else if (c < 128) {
        lowered.push_back(static_cast<char32_t>(kAsciiLower[c]));
      } else {
        lowered.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
      }
    }
    std::u32string& decomposed = buffers.decomposed;
    nfd(lowered, decomposed);
    size_t kept = 0;
    for (char32_t c : decomposed) {
      if (c < 128 || category(c) != UTF8PROC_CATEGORY_MN) decomposed[kept++] = c;
    }
    chars = decomposed.data();
    count = kept;
  }
  bool word_open = false;
  for (size_t i = 0; i < count; ++i) {
    char32_t c = chars[i];
    if (is_punctuation(c)) {
      if (word_open) ends.push_back(static_cast<uint32_t>(base + out.size()));
      append_utf8(out, c);
      ends.push_back(static_cast<uint32_t>(base + out.size()));
      word_open = false;
    } else {
      append_utf8(out, c);
      word_open = true;
    }
  }
  if (word_open) ends.push_back(static_cast<uint32_t>(base + out.size()));
}

size_t BasicTokenizer::append_unicode(const char32_t* run, size_t count, UnicodeBuffers& buffers, std::string& bytes,
                                      size_t len, size_t slack, std::vector<uint32_t>& ends) const {
  std::string& words = buffers.general;
  words.clear();
  emit_general_run(run, count, buffers, words, ends, len);
  if (len + words.size() + slack > bytes.size()) bytes.resize(len + words.size() + slack);
  std::memcpy(bytes.data() + len, words.data(), words.size());
  return len + words.size();
}

size_t BasicTokenizer::redo_run(const unsigned char* text, size_t begin, size_t end, size_t len_mark,
                                size_t ends_mark, UnicodeBuffers& buffers, std::string& bytes, size_t slack,
                                std::vector<uint32_t>& ends) const {
  ends.resize(ends_mark);
  std::u32string& chars = buffers.run;
  chars.clear();
  for (size_t i = begin; i < end;) {
    bool bad = false;
    char32_t cp = decode_utf8(text, end, i, &bad);
    if (classify(cp) != kDrop) chars.push_back(cp);
  }
  return append_unicode(chars.data(), chars.size(), buffers, bytes, len_mark, slack, ends);
}

void BasicTokenizer::split(std::string_view text, std::string& bytes, std::vector<uint32_t>& ends,
                           TokenizeCounts* counts) const {
  ends.clear();
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size(), slack = n + 16;
  // The ASCII path writes at most one byte per input byte through `out`; the Unicode path grows
  // the buffer to keep that much slack.
  bytes.resize(slack);
  char* out = bytes.data();
  size_t len = 0;
  uint64_t invalid = 0;
  UnicodeBuffers unicode;
  bool in_run = false, general = false, word_open = false;
  size_t run_begin = 0, len_mark = 0, ends_mark = 0;
  // A run is written on the ASCII path until a non-ASCII character marks it general; then it is
  // redone on the Unicode path when it ends.
  auto end_run = [&](size_t at) {
    if (!in_run) return;
    in_run = false;
    if (!general) {
      if (word_open) ends.push_back(static_cast<uint32_t>(len));
      return;
    }
    len = redo_run(s, run_begin, at, len_mark, ends_mark, unicode, bytes, slack, ends);
    out = bytes.data();
  };
  auto start_run = [&](size_t at) {
    in_run = true;
    general = word_open = false;
    run_begin = at;
    len_mark = len;
    ends_mark = ends.size();
  };
  for (size_t i = 0; i < n;) {
    unsigned char b = s[i];
    if (b < 0x80) {
      uint8_t kind = kAsciiKind[b];
      if (kind == kSpace) {
        end_run(i);
      } else if (kind != kDrop) {
        if (!in_run) start_run(i);
        if (!general) {
          if (kind == kPunct) {
            if (word_open) ends.push_back(static_cast<uint32_t>(len));
            out[len++] = static_cast<char>(b);
            ends.push_back(static_cast<uint32_t>(len));
            word_open = false;
          } else {
            out[len++] = lower_case_ ? kAsciiLower[b] : static_cast<char>(b);
            word_open = true;
          }
        }
      }
      ++i;
      continue;
    }
    size_t at = i;
    bool bad = false;
    char32_t cp = decode_utf8(s, n, i, &bad);
    invalid += bad;
    CharKind kind = classify(cp);
    if (kind == kSpace || kind == kCjk) end_run(at);
    if (kind == kCjk) {
      len = append_unicode(&cp, 1, unicode, bytes, len, slack, ends);
      out = bytes.data();
    } else if (kind == kOther) {
      if (!in_run) start_run(at);
      general = true;
    }
  }
  end_run(n);
  bytes.resize(len);
  if (counts) {
    counts->bytes += n;
    counts->invalid_utf8 += invalid;
    counts->words += ends.size();
  }
}

Tokenizer::Tokenizer(const Vocab& vocab, TokenizerOptions options)
    : vocab_(vocab), options_(options), basic_(options.lower_case) {}

bool Tokenizer::wordpiece(const char* w, size_t length, std::vector<int32_t>& ids) const {
  const auto max_chars = static_cast<size_t>(options_.max_word_chars);
  if (length > max_chars && utf8_length(w, length) > max_chars) {
    ids.push_back(vocab_.unk_id);
    return false;
  }
  const size_t mark = ids.size();
  size_t start = 0;
  while (start < length) {
    const bool cont = start > 0;
    size_t end = std::min(length, start + vocab_.max_piece_bytes(cont));
    int32_t id = -1;
    for (; end > start; --end) {
      if (end < length && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80) continue;
      id = vocab_.find_piece(w + start, end - start, cont);
      if (id >= 0) break;
    }
    if (id < 0) {
      ids.resize(mark);
      ids.push_back(vocab_.unk_id);
      return false;
    }
    ids.push_back(id);
    start = end;
  }
  return true;
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& ids, TokenizeCounts* counts) const {
  std::string bytes;
  std::vector<uint32_t> ends;
  basic_.split(text, bytes, ends, counts);
  const size_t before = ids.size();
  uint64_t unknown = 0;
  uint32_t begin = 0;
  for (uint32_t end : ends) {
    unknown += !wordpiece(bytes.data() + begin, end - begin, ids);
    begin = end;
  }
  if (counts) {
    counts->tokens += ids.size() - before;
    counts->unknown += unknown;
  }
}

}  // namespace bert
