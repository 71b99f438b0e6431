// Python's str.isspace() and whitespace splitting through utf8proc (see python_text.h).
#include "tasks/python_text.h"

#include <utf8proc.h>

#include "text/utf8.h"

namespace bert {

bool python_isspace(char32_t c) {
  const auto cp = static_cast<utf8proc_int32_t>(c);
  const utf8proc_propval_t bidi = utf8proc_get_property(cp)->bidi_class;
  return utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS || bidi == UTF8PROC_BIDI_CLASS_WS ||
         bidi == UTF8PROC_BIDI_CLASS_B || bidi == UTF8PROC_BIDI_CLASS_S;
}

std::string python_split_join(const std::string& text) {
  std::string out, word;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  auto flush = [&] {
    if (word.empty()) return;
    if (!out.empty()) out += ' ';
    out += word;
    word.clear();
  };
  for (size_t i = 0; i < text.size();) {
    const size_t begin = i;
    bool invalid = false;
    if (python_isspace(decode_utf8(s, text.size(), i, &invalid))) flush();
    else word.append(text, begin, i - begin);
  }
  flush();
  return out;
}

}  // namespace bert
