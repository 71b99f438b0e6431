// libFuzzer target: bert-prep's text reader — a corpus file indexed into documents (blank-line
// and one-per-file modes), read back, and split into sentences (line and split modes).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "prep/text_corpus.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "corpus.txt");
  const std::vector<bert::CorpusFile> files = {{path, size}};
  try {
    for (const bert::DocumentMode mode : {bert::DocumentMode::blank_line, bert::DocumentMode::file}) {
      bert::DocumentReader reader(files);
      std::string text;
      std::vector<std::string_view> sentences;
      for (const bert::DocumentRange& d : bert::index_documents(files, mode)) {
        if (d.begin > d.end || d.end > size) std::abort();
        reader.read(d, text);
        for (const bert::SentenceMode s : {bert::SentenceMode::line, bert::SentenceMode::split}) {
          bert::document_sentences(text, s, sentences);
          for (std::string_view v : sentences) {
            if (v.data() < text.data() || v.data() + v.size() > text.data() + text.size()) std::abort();
          }
        }
      }
    }
  } catch (const bert::Error&) {
  }
  return 0;
}
