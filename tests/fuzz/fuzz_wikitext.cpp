// libFuzzer target: the wikitext converter (bert-prep wiki) on arbitrary page text, with and
// without headings. Its output must be lines: none empty, none holding a line break.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "prep/wikitext.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const bool headings : {true, false}) {
    for (const std::string& line : bert::wikitext_to_paragraphs(text, {.keep_headings = headings})) {
      if (line.empty() || line.find('\n') != std::string::npos) std::abort();
    }
  }
  return 0;
}
