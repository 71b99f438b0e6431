// bert-squad-eval DATASET.json PREDICTIONS.json: SQuAD exact match and F1 of a predictions file
// ({question id: answer text}, as DLE's run_squad writes predictions.json), computed as the
// official evaluate-v1.1.py (a v1.1 dataset) or evaluate-v2.0.py (a "version": "v2.0" dataset,
// without a no-answer probability file) compute them; prints the same JSON object. A malformed
// dataset or predictions file is an error naming the file, the key and the question id.
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "core/error.h"
#include "tasks/squad_metrics.h"

namespace {

nlohmann::json read_json(const char* path) {
  std::ifstream in(path);
  if (!in) bert::fail(bert::Code::io, "cannot open '", path, "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    bert::fail(bert::Code::data, "'", path, "' is not valid JSON: ", e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kUsage = "usage: bert-squad-eval DATASET.json PREDICTIONS.json\n";
  if (bert_tools::asks_for_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const bert_tools::CommandLine args("bert-squad-eval", kUsage, argc, argv, 1, {.min_positional = 2, .max_positional = 2, .positional_name = "files (DATASET.json PREDICTIONS.json)"});
  const char* dataset_path = args.positional()[0].c_str();
  const char* predictions_path = args.positional()[1].c_str();
  try {
    const nlohmann::json dataset = read_json(dataset_path), predictions = read_json(predictions_path);
    if (!predictions.is_object()) bert::fail(bert::Code::data, "'", predictions_path, "' must be an object {question id: answer text}");
    for (const auto& [id, answer] : predictions.items()) {
      if (!answer.is_string()) {
        bert::fail(bert::Code::data, "'", predictions_path, "': the answer of question '", id, "' must be a string, got ",
                   answer.type_name());
      }
    }
    try {  // the dataset's structure as the official scripts read it, named by key path and question id
      std::printf("%s\n", bert::squad_evaluate(dataset, predictions).dump().c_str());
    } catch (const bert::Error& e) {
      bert::fail(e.code(), "'", dataset_path, "' with predictions '", predictions_path, "': ", e.what());
    }
    return 0;
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
