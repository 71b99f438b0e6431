// libFuzzer target: a SQuAD JSON file through read_squad_file (for prediction and for training),
// squad_features (small windows so that contexts split into many), squad_predictions (n-best
// post-processing and get_final_text, on logits derived from the features) and, when the file has
// answers, squad_evaluate on those predictions. Cased and uncased tokenizers, v1.1 and v2.0 rules.
// Beyond crashes, it aborts when a feature breaks the documented invariants (ids in the
// vocabulary, positions inside the window, one window list per feature).
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "tasks/squad_examples.h"
#include "tasks/squad_features.h"
#include "tasks/squad_metrics.h"
#include "tasks/squad_predictions.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "fuzz_common.h"

namespace {

const bert::Vocab& vocab() {
  static const bert::Vocab v = bert::Vocab::from_tokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "the", "un", "##able", "##s", "##ing", ".", ",", "é",
       "##é", "中", "play", "##ed", "when", "who", "what", "1", "##9", "##0", "paris", "is", "in", "france", "?"},
      "fuzz seed vocab");
  return v;
}

const bert::SquadFeatureOptions kFeatureOptions{24, 4, 6};  // max_seq_length, doc_stride, max_query_length

void check_features(const bert::SquadFile& file, const bert::SquadFeatures& f) {
  const size_t cells = static_cast<size_t>(f.count) * f.seq_length;
  if (f.seq_length != kFeatureOptions.max_seq_length || f.input_ids.size() != cells ||
      f.segment_ids.size() != cells || f.input_mask.size() != cells || f.windows.size() != static_cast<size_t>(f.count) ||
      f.start_positions.size() != f.windows.size() || f.end_positions.size() != f.windows.size()) {
    std::abort();
  }
  for (int32_t id : f.input_ids) {
    if (id < 0 || id >= vocab().size()) std::abort();
  }
  for (size_t w = 0; w < f.windows.size(); ++w) {
    const bert::SquadWindow& win = f.windows[w];
    const size_t words = file.paragraph_words[file.examples.at(win.example).paragraph].size();
    if (win.length > f.seq_length || win.token_to_word.size() != win.max_context.size() ||
        win.doc_offset + win.token_to_word.size() + 1 != static_cast<size_t>(win.length)) {
      std::abort();
    }
    for (int32_t word : win.token_to_word) {
      if (word < 0 || static_cast<size_t>(word) >= words) std::abort();
    }
    if (f.start_positions[w] < 0 || f.start_positions[w] >= win.length || f.end_positions[w] < 0 ||
        f.end_positions[w] >= win.length) {
      std::abort();
    }
  }
}

// [count, 2, seq_length] logits from the features' ids and positions: finite, with ties.
std::vector<float> logits_for(const bert::SquadFeatures& f) {
  std::vector<float> logits(static_cast<size_t>(f.count) * 2 * f.seq_length);
  for (size_t i = 0; i < logits.size(); ++i) {
    const size_t position = i % f.seq_length, window = i / (2 * f.seq_length);
    const uint32_t id = static_cast<uint32_t>(f.input_ids[window * f.seq_length + position]);
    logits[i] = static_cast<float>((id * 31u + static_cast<uint32_t>(i) * 17u) % 23u) / 4.0f - 2.5f;
  }
  return logits;
}

void predict(const bert::SquadFile& file, const bert::Tokenizer& tokenizer) {
  const bert::SquadFeatures features = bert::squad_features(file, tokenizer, kFeatureOptions, false);
  check_features(file, features);
  const std::vector<float> logits = logits_for(features);
  bert::SquadPredictionOptions options;
  options.n_best = 3;
  options.max_answer_length = 5;
  options.v2 = file.v2;
  const bert::SquadPredictions p = bert::squad_predictions(file, features, logits.data(), tokenizer, options);
  if (p.predictions.size() != file.examples.size()) std::abort();  // every question has a window
  if (file.has_answers) bert::squad_evaluate(file.json, nlohmann::json::parse(p.predictions.dump()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "squad.json");
  for (const bool lower : {true, false}) {
    bert::TokenizerOptions options;
    options.lower_case = lower;
    const bert::Tokenizer tokenizer(vocab(), options);
    try {
      predict(bert::read_squad_file(path, false), tokenizer);
    } catch (const bert::Error&) {
    }
    try {
      const bert::SquadFile training = bert::read_squad_file(path, true);
      check_features(training, bert::squad_features(training, tokenizer, kFeatureOptions, true));
    } catch (const bert::Error&) {
    }
  }
  return 0;
}
