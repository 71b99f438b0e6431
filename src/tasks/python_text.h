// Python's whitespace rules where SQuAD's reference scripts use them on text: str.isspace() and
// " ".join(text.split()) (Unicode whitespace, not only ASCII), for answer texts and de-tokenised
// predictions.
#pragma once

#include <string>

namespace bert {

// str.isspace() of one code point: category Zs, or bidirectional class WS, B or S.
bool python_isspace(char32_t c);
// " ".join(text.split()) of UTF-8 text.
std::string python_split_join(const std::string& text);

}  // namespace bert
