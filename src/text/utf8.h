// UTF-8 decoding and encoding for the text pipeline. Invalid or truncated byte sequences are
// never an error: each maximal invalid subpart decodes to U+FFFD and is counted by the caller,
// which is how bert-prep replaces bad bytes in a corpus instead of stopping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bert {

constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point starting at s[i] (i < n) and advances i past it. On an invalid or
// truncated sequence returns kReplacementChar, sets *invalid, and skips the maximal subpart.
inline char32_t decode_utf8(const unsigned char* s, size_t n, size_t& i, bool* invalid) {
  unsigned char b0 = s[i];
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int need;
  char32_t cp;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    ++i;
    *invalid = true;
    return kReplacementChar;
  }
  size_t j = i + 1;
  for (int k = 0; k < need; ++k, ++j) {
    unsigned char b = j < n ? s[j] : 0;
    bool ok = j < n && (k == 0 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF));
    if (!ok) {
      i = j;
      *invalid = true;
      return kReplacementChar;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i = j;
  return cp;
}

inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Number of code points in valid UTF-8 (counts non-continuation bytes).
inline size_t utf8_length(const char* s, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
  return count;
}

}  // namespace bert
