// libFuzzer target: the Wikipedia dump reader (bert-prep wiki) on an arbitrary file, XML or bz2:
// expat, the page assembler and the bz2 stream decoder, each page's text through the converter.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "prep/wiki_dump.h"
#include "prep/wikitext.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "dump.xml");
  try {
    bert::read_wiki_dump(path, [](bert::WikiPage&& page) { bert::wikitext_to_paragraphs(page.text, {}); }, nullptr);
  } catch (const bert::Error&) {
  }
  return 0;
}
