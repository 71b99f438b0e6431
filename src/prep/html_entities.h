// HTML character references as WikiExtractor reads them: named (HTML 4.01's 252), decimal and hex.
#pragma once

#include <string_view>

namespace bert {

// `name` is the text between '&' and ';' ("nbsp", "#160", "#xA0"). False when it names no
// character (unknown name, bad number, beyond U+10FFFF or a surrogate).
bool decode_html_entity(std::string_view name, char32_t& code_point);

}  // namespace bert
