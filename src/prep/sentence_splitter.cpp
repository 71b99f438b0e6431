// Sentence boundary rules. The splitter only needs to be good enough for next-sentence
// prediction: a missed boundary merges two sentences, a false one splits a sentence in two.
#include "prep/sentence_splitter.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace bert {
namespace {

constexpr std::array<std::string_view, 44> kAbbreviations = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "e.g", "i.e", "cf", "al",
    "fig", "figs", "no", "nos", "vol", "vols", "pp", "p", "ed", "eds", "inc", "ltd", "co", "corp",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "gen",
    "col", "approx"};

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_closer(unsigned char c) { return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && is_space(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The word that ends at `end` (exclusive, the position of the period), lower-cased.
std::string word_before(std::string_view text, size_t end) {
  size_t begin = end;
  while (begin > 0 && !is_space(static_cast<unsigned char>(text[begin - 1])) && text[begin - 1] != '(' &&
         text[begin - 1] != '"') {
    --begin;
  }
  std::string w(text.substr(begin, end - begin));
  for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return w;
}

bool is_abbreviation(std::string_view text, size_t period) {
  std::string w = word_before(text, period);
  if (w.empty()) return false;
  if (w.size() == 1 && std::isalpha(static_cast<unsigned char>(w[0]))) return true;  // initials: "J. K."
  if (std::find(kAbbreviations.begin(), kAbbreviations.end(), w) != kAbbreviations.end()) return true;
  // dotted acronyms such as "U.S" or "a.m"
  return w.size() >= 3 && w[w.size() - 2] == '.' && std::isalpha(static_cast<unsigned char>(w.back()));
}

// A sentence may start at `i`: an upper-case letter, digit, quote, bracket, or non-ASCII letter.
bool plausible_start(std::string_view text, size_t i) {
  if (i >= text.size()) return false;
  auto c = static_cast<unsigned char>(text[i]);
  return std::isupper(c) || std::isdigit(c) || c == '"' || c == '\'' || c == '(' || c == '[' || c >= 0x80;
}

}  // namespace

void split_sentences(std::string_view text, std::vector<std::string_view>& out) {
  size_t start = 0;
  const size_t n = text.size();
  auto emit = [&](size_t end) {
    std::string_view s = trim(text.substr(start, end - start));
    if (!s.empty()) out.push_back(s);
    start = end;
  };
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    // CJK full stop / exclamation / question (U+3002, U+FF01, U+FF1F) end a sentence outright.
    if (c == 0xE3 && i + 2 < n && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
        static_cast<unsigned char>(text[i + 2]) == 0x82) {
      emit(i + 3);
      i += 2;
      continue;
    }
    if (c == 0xEF && i + 2 < n && static_cast<unsigned char>(text[i + 1]) == 0xBC &&
        (static_cast<unsigned char>(text[i + 2]) == 0x81 || static_cast<unsigned char>(text[i + 2]) == 0x9F)) {
      emit(i + 3);
      i += 2;
      continue;
    }
    if (c != '.' && c != '!' && c != '?') continue;
    size_t j = i + 1;
    while (j < n && (text[j] == '.' || text[j] == '!' || text[j] == '?')) ++j;  // "...", "?!"
    while (j < n && is_closer(static_cast<unsigned char>(text[j]))) ++j;
    if (j >= n || !is_space(static_cast<unsigned char>(text[j]))) {
      i = j - 1;
      continue;
    }
    size_t k = j;
    while (k < n && is_space(static_cast<unsigned char>(text[k]))) ++k;
    bool boundary = plausible_start(text, k) && !(c == '.' && j == i + 1 && is_abbreviation(text, i));
    if (boundary) emit(j);
    i = j - 1;
  }
  emit(n);
}

}  // namespace bert
