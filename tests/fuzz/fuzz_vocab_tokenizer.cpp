// libFuzzer target: a vocabulary file and text through Vocab::load and the WordPiece tokenizer.
// The input is the vocab, a NUL byte, then the text (no NUL: the built-in seed vocab and the
// whole input as text, so the tokenizer is reached even when the vocab part is refused).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "fuzz_common.h"

namespace {

const bert::Vocab& seed_vocab() {
  static const bert::Vocab v = bert::Vocab::from_tokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "the", "un", "##able", "##s", "##ing", ".", ",", "é", "##é",
       "中", "play", "##ed"},
      "fuzz seed vocab");
  return v;
}

void tokenize(const bert::Vocab& vocab, std::string_view text) {
  for (const bool lower : {true, false}) {
    bert::TokenizerOptions options;
    options.lower_case = lower;
    bert::Tokenizer tokenizer(vocab, options);
    std::vector<int32_t> ids;
    bert::TokenizeCounts counts;
    tokenizer.encode(text, ids, &counts);
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab.size()) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(bytes, 0, size);
  if (!nul) {
    tokenize(seed_vocab(), std::string_view(bytes, size));
    return 0;
  }
  const size_t vocab_size = static_cast<const char*>(nul) - bytes;
  const std::string path = fuzz::write_input(data, vocab_size, "vocab.txt");
  try {
    const bert::Vocab vocab = bert::Vocab::load(path);
    tokenize(vocab, std::string_view(bytes + vocab_size + 1, size - vocab_size - 1));
  } catch (const bert::Error&) {
  }
  return 0;
}
