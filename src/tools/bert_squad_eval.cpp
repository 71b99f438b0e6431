// bert-squad-eval DATASET.json PREDICTIONS.json: SQuAD exact match and F1 of a predictions file
// ({question id: answer text}, as DLE's run_squad writes predictions.json), computed as the
// official evaluate-v1.1.py (a v1.1 dataset) or evaluate-v2.0.py (a "version": "v2.0" dataset,
// without a no-answer probability file) compute them; prints the same JSON object.
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tasks/squad_metrics.h"
#include "tool_help.h"

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
  const bool help = bert_tools::asks_for_help(argc, argv);
  if (help || argc != 3) {
    std::fprintf(help ? stdout : stderr, "usage: bert-squad-eval DATASET.json PREDICTIONS.json\n");
    return help ? 0 : 2;
  }
  try {
    std::printf("%s\n", bert::squad_evaluate(read_json(argv[1]), read_json(argv[2])).dump().c_str());
    return 0;
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
