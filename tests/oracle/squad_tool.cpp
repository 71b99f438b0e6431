// Test helper for test_squad.py: the core's SQuAD reader, features and predictions on the command
// line, so Python can compare them with Hugging Face's squad_convert_examples_to_features and
// compute_predictions_logits. The vocabulary's casing decides lower-casing, as the tools do.
//   squad_tool features FILE VOCAB train|eval MAX_SEQ DOC_STRIDE MAX_QUERY
//       one JSON object per feature, then {"skipped": N}
//   squad_tool predict FILE VOCAB LOGITS MAX_SEQ DOC_STRIDE MAX_QUERY N_BEST MAX_ANSWER THRESHOLD OUT_DIR
//       LOGITS: float32 [features, 2, MAX_SEQ]; writes OUT_DIR/predictions.json, nbest_predictions.json
//       (and null_odds.json for v2.0)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tasks/squad_examples.h"
#include "tasks/squad_features.h"
#include "tasks/squad_predictions.h"

namespace {

bert::SquadFeatureOptions options(char** argv) {
  bert::SquadFeatureOptions o;
  o.max_seq_length = std::atoi(argv[0]);
  o.doc_stride = std::atoi(argv[1]);
  o.max_query_length = std::atoi(argv[2]);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if ((cmd == "features" && argc == 8) || (cmd == "predict" && argc == 12)) {
      const bool training = cmd == "features" && std::string(argv[4]) == "train";
      const bert::SquadFile file = bert::read_squad_file(argv[2], training);
      const bert::Vocab vocab = bert::Vocab::load(argv[3]);
      bert::TokenizerOptions topt;
      topt.lower_case = !vocab.has_upper_case();
      const bert::Tokenizer tokenizer(vocab, topt);
      const bert::SquadFeatures f =
          bert::squad_features(file, tokenizer, options(argv + 5), training);
      if (cmd == "features") {
        const size_t S = static_cast<size_t>(f.seq_length);
        for (int i = 0; i < f.count; ++i) {
          const bert::SquadWindow& w = f.windows[i];
          nlohmann::json to_orig = nlohmann::json::object(), max_context = nlohmann::json::object();
          for (size_t j = 0; j < w.token_to_word.size(); ++j) {
            to_orig[std::to_string(w.doc_offset + j)] = w.token_to_word[j];
            max_context[std::to_string(w.doc_offset + j)] = w.max_context[j] != 0;
          }
          auto row = [&](const std::vector<int32_t>& v) {
            return std::vector<int32_t>(v.begin() + i * S, v.begin() + (i + 1) * S);
          };
          std::cout << nlohmann::json({{"qas_id", file.examples[w.example].qas_id},
                                       {"input_ids", row(f.input_ids)},
                                       {"token_type_ids", row(f.segment_ids)},
                                       {"attention_mask", row(f.input_mask)},
                                       {"start_position", f.start_positions[i]},
                                       {"end_position", f.end_positions[i]},
                                       {"is_impossible", w.is_impossible},
                                       {"paragraph_len", w.token_to_word.size()},
                                       {"token_to_orig_map", to_orig},
                                       {"token_is_max_context", max_context}})
                           .dump()
                    << "\n";
        }
        std::cout << nlohmann::json({{"skipped", f.skipped}}).dump() << "\n";
        return 0;
      }
      std::ifstream in(argv[4], std::ios::binary);
      std::vector<float> logits(static_cast<size_t>(f.count) * 2 * f.seq_length);
      in.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
      BERT_CHECK(in.gcount() == static_cast<std::streamsize>(logits.size() * sizeof(float)), bert::Code::io,
                 "'", argv[4], "' does not hold ", logits.size(), " floats");
      bert::SquadPredictionOptions po;
      po.n_best = std::atoi(argv[8]);
      po.max_answer_length = std::atoi(argv[9]);
      po.null_score_diff_threshold = std::atof(argv[10]);
      po.v2 = file.v2;
      bert::write_squad_predictions(bert::squad_predictions(file, f, logits.data(), tokenizer, po), po.v2, argv[11]);
      return 0;
    }
    std::fprintf(stderr, "usage: see the top of squad_tool.cpp\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
