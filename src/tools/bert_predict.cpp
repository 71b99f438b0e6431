// bert-predict: labels for a GLUE TSV file from a fine-tuned model (an engine checkpoint of a
// sequence_classification task, or a Hugging Face BertForSequenceClassification folder), through
// an inference-only session and bert_infer. Writes "index<TAB>prediction" lines (label names, or
// the score for STS-B) as GLUE submissions are formatted, and prints the task's metric when the
// file has labels, and the throughput.
//   bert-predict --model CKPT|HF_DIR --task NAME --vocab FILE --input FILE.tsv --output PRED.tsv
//                [--max-seq-length 128] [--batch 64] [--threads N] [--lower-case 0|1]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "core/error.h"
#include "finetune_common.h"
#include "tool_common.h"

namespace {

using nlohmann::json;

int usage() {
  std::fprintf(stderr, "usage: bert-predict --model CKPT|HF_DIR --task NAME --vocab FILE --input FILE.tsv --output PRED.tsv\n"
                       "                    [--max-seq-length 128] [--batch 64] [--threads N] [--lower-case 0|1]\n");
  return 2;
}

int run(const std::map<std::string, std::string>& a) {
  for (const char* key : {"--model", "--task", "--vocab", "--input", "--output"}) {
    if (!a.count(key)) {
      std::fprintf(stderr, "error: %s is required\n", key);
      return usage();
    }
  }
  auto number = [&](const char* key, int fallback) {
    if (!a.count(key)) return fallback;
    char* end = nullptr;
    const long v = std::strtol(a.at(key).c_str(), &end, 10);
    BERT_CHECK(*end == '\0' && v > 0 && v < (1 << 20), bert::Code::invalid_argument, key, " '", a.at(key),
               "' is not a positive integer");
    return static_cast<int>(v);
  };
  const bert::GlueTask task = bert::glue_task(a.at("--task"));
  const int max_seq = number("--max-seq-length", 128), batch = number("--batch", 64);
  const bert_tools::InitWeights init = bert_tools::resolve_init_weights(a.at("--model"), a.at("--output") + ".imported.h5");
  const json saved_task = init.config.value("task", json::object());
  BERT_CHECK(saved_task.value("type", "") == "sequence_classification" &&
                 saved_task.value("num_labels", 0) == task.num_labels(),
             bert::Code::invalid_argument, "'", a.at("--model"), "' holds a ", saved_task.dump(), " model, not the ",
             task.num_labels(), "-label sequence classifier task ", task.name, " needs");
  const bert::Vocab vocab = bert::Vocab::load(a.at("--vocab"));
  bert::TokenizerOptions topt;
  topt.lower_case = a.count("--lower-case") ? a.at("--lower-case") != "0" : !vocab.has_upper_case();
  const bert::Tokenizer tokenizer(vocab, topt);
  const bert_tools::GlueSet set = bert_tools::load_glue_set(task, a.at("--input"), tokenizer, max_seq);

  json cfg = {{"model", init.config.at("model")},
              {"task", saved_task},
              {"mode", "inference"},
              {"train", {{"init_checkpoint", init.checkpoint}, {"micro_batch", batch}, {"threads", number("--threads", 1)}}},
              {"data", {{"max_seq_length", max_seq}, {"max_predictions_per_seq", 0}}}};
  if (!a.count("--threads")) cfg["train"].erase("threads");
  bert_session* s = nullptr;
  if (bert_tools::failed(bert_session_create(cfg.dump().c_str(), nullptr, &s), "bert_session_create")) return 1;
  std::vector<float> logits;
  double secs = 0;
  const bool ok = bert_tools::infer_logits(s, set.features, task.num_labels(), batch, logits, &secs);
  bert_session_destroy(s);
  if (!ok) return 1;

  std::ofstream out(a.at("--output"));
  out << "index\tprediction\n";
  const int L = task.num_labels();
  for (size_t i = 0; i < set.examples.size(); ++i) {
    const float* row = logits.data() + i * L;
    out << set.examples[i].id << '\t';
    if (task.regression()) {
      out << row[0];
    } else {
      out << task.labels[std::max_element(row, row + L) - row];
    }
    out << '\n';
  }
  out.close();
  BERT_CHECK(out, bert::Code::io, "cannot write '", a.at("--output"), "'");
  std::printf("%s: %d examples, %.1f sequences/s (seq %d, batch %d)\n", a.at("--input").c_str(), set.features.count,
              set.features.count / secs, max_seq, batch);
  if (set.labelled) {
    std::printf("%s: %s\n", task.name.c_str(), bert_tools::format_metrics(bert_tools::glue_metrics(task, set, logits)).c_str());
  }
  std::printf("wrote %s\n", a.at("--output").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) return usage();
    args[key] = argv[i + 1];
  }
  try {
    return bert_tools::finish(run(args));
  } catch (const std::exception& e) {  // bert::Error included
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
