// bert-predict: predictions of a fine-tuned model (an engine checkpoint, or a Hugging Face folder)
// through an inference-only session and bert_infer, with the throughput, and the task's metric when
// the input is labelled:
//  - GLUE (--task NAME, a sequence_classification model): "index<TAB>prediction" lines (label
//    names, or the score for STS-B) as GLUE submissions are formatted;
//  - SQuAD (--task squad, a question_answering model): --input a SQuAD v1.1/v2.0 JSON file,
//    --output a directory that gets predictions.json, nbest_predictions.json (and null_odds.json
//    for v2.0) as DLE's run_squad writes them; EM/F1 when the file has answers;
//  - CoNLL (--task conll, a token_classification model): "word<SPACE>tag" lines, a blank line
//    between sentences (the CoNLL format bert-finetune reads); entity F1 against the input's tags.
//   bert-predict --model CKPT|HF_DIR --task NAME --vocab FILE --input FILE --output PATH
//                [--max-seq-length 128 (squad: 384)] [--batch 64] [--threads N] [--lower-case 0|1]
//                [--doc-stride 128] [--max-query-length 64] [--n-best 20] [--max-answer-length 30]
//                [--null-score-diff-threshold 0.0]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "core/error.h"
#include "conll_task.h"
#include "finetune_common.h"
#include "squad_task.h"
#include "tool_common.h"
#include "tool_help.h"

namespace {

using nlohmann::json;

int usage(FILE* out = stderr) {
  std::fprintf(out, "usage: bert-predict --model CKPT|HF_DIR --task NAME --vocab FILE --input FILE --output PATH\n"
                       "                    [--max-seq-length 128 (squad: 384)] [--batch 64] [--threads N] [--lower-case 0|1]\n"
                       "                    [--device cpu|cuda|cuda:N (cpu)] [--precision fp32|bf16|fp16 (fp32)]\n"
                       "  NAME: a GLUE task (TSV in, TSV out), squad (SQuAD JSON in, a directory of predictions out)\n"
                       "  or conll (CoNLL file in and out); squad also takes [--doc-stride 128] [--max-query-length 64]\n"
                       "  [--n-best 20] [--max-answer-length 30] [--null-score-diff-threshold 0.0]\n");
  return out == stderr ? 2 : 0;
}


using Args = std::map<std::string, std::string>;

int number(const Args& a, const char* key, int fallback) {
  if (!a.count(key)) return fallback;
  char* end = nullptr;
  const long v = std::strtol(a.at(key).c_str(), &end, 10);
  BERT_CHECK(*end == '\0' && v > 0 && v < (1 << 20), bert::Code::invalid_argument, key, " '", a.at(key),
             "' is not a positive integer");
  return static_cast<int>(v);
}

double real(const Args& a, const char* key, double fallback) {
  if (!a.count(key)) return fallback;
  char* end = nullptr;
  const double v = std::strtod(a.at(key).c_str(), &end);
  BERT_CHECK(*end == '\0' && !a.at(key).empty() && std::isfinite(v), bert::Code::invalid_argument, key, " '",
             a.at(key), "' is not a number");
  return v;
}

// The model's weights and recorded task, checked against the head the task needs.
json model_task(const Args& a, const bert_tools::InitWeights& init, const std::string& type, int num_labels,
                const std::string& what) {
  const json saved = init.config.value("task", json::object());
  BERT_CHECK(saved.value("type", "") == type && (num_labels == 0 || saved.value("num_labels", 0) == num_labels),
             bert::Code::invalid_argument, "'", a.at("--model"), "' holds a ", saved.dump(), " model, not the ", what);
  return saved;
}

// An inference-only session of the model at `max_seq`; nullptr after printing the error.
bert_session* open_session(const Args& a, const bert_tools::InitWeights& init, const json& task, int max_seq) {
  json cfg = {{"model", init.config.at("model")},
              {"task", task},
              {"mode", "inference"},
              {"train", {{"init_checkpoint", init.checkpoint}, {"micro_batch", number(a, "--batch", 64)}}},
              {"data", {{"max_seq_length", max_seq}, {"max_predictions_per_seq", 0}}}};
  if (a.count("--threads")) cfg["train"]["threads"] = number(a, "--threads", 1);
  if (a.count("--device")) cfg["device"] = a.at("--device");  // the session refuses what it cannot run
  if (a.count("--precision")) cfg["train"]["precision"] = a.at("--precision");
  bert_session* s = nullptr;
  if (bert_tools::failed(bert_session_create(cfg.dump().c_str(), nullptr, &s), "bert_session_create")) return nullptr;
  return s;
}

void write_or_fail(std::ofstream& out, const std::string& path) {
  out.close();
  BERT_CHECK(out, bert::Code::io, "cannot write '", path, "'");
}

int run_glue(const Args& a, const bert_tools::InitWeights& init, const bert::Tokenizer& tokenizer) {
  const bert::GlueTask task = bert::glue_task(a.at("--task"));
  const int max_seq = number(a, "--max-seq-length", 128), batch = number(a, "--batch", 64);
  const json saved_task = model_task(a, init, "sequence_classification", task.num_labels(),
                                     std::to_string(task.num_labels()) + "-label sequence classifier task " +
                                         task.name + " needs");
  const bert_tools::GlueSet set = bert_tools::load_glue_set(task, a.at("--input"), tokenizer, max_seq);
  bert_session* s = open_session(a, init, saved_task, max_seq);
  if (!s) return 1;
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
  write_or_fail(out, a.at("--output"));
  std::printf("%s: %d examples, %.1f sequences/s (seq %d, batch %d)\n", a.at("--input").c_str(), set.features.count,
              set.features.count / secs, max_seq, batch);
  if (set.labelled) {
    std::printf("%s: %s\n", task.name.c_str(), bert_tools::format_metrics(bert_tools::glue_metrics(task, set, logits)).c_str());
  }
  std::printf("wrote %s\n", a.at("--output").c_str());
  return 0;
}

int run_squad(const Args& a, const bert_tools::InitWeights& init, const bert::Tokenizer& tokenizer) {
  const json saved_task = model_task(a, init, "question_answering", 0, "question-answering model task squad needs");
  bert::SquadFeatureOptions fo;
  fo.max_seq_length = number(a, "--max-seq-length", 384);
  fo.doc_stride = number(a, "--doc-stride", 128);
  fo.max_query_length = number(a, "--max-query-length", 64);
  bert::SquadPredictionOptions po;
  po.n_best = number(a, "--n-best", 20);
  po.max_answer_length = number(a, "--max-answer-length", 30);
  po.null_score_diff_threshold = real(a, "--null-score-diff-threshold", 0.0);
  const bert_tools::SquadSet set = bert_tools::load_squad_set(a.at("--input"), tokenizer, fo, false);
  po.v2 = set.file.v2;
  const std::string& dir = a.at("--output");
  std::filesystem::create_directories(dir);
  bert_session* s = open_session(a, init, saved_task, fo.max_seq_length);
  if (!s) return 1;
  std::vector<float> logits;
  double secs = 0;
  const bool ok = bert_tools::infer_squad_logits(s, set.features, number(a, "--batch", 64), logits, &secs);
  bert_session_destroy(s);
  if (!ok) return 1;
  const bert_tools::SquadOutcome o = bert_tools::squad_outcome(set, logits, tokenizer, po);
  bert::write_squad_predictions(o.predictions, po.v2, dir);
  std::printf("%s: %zu questions, %d windows, %.1f sequences/s (seq %d, batch %d)\n", a.at("--input").c_str(),
              set.file.examples.size(), set.features.count, set.features.count / secs, fo.max_seq_length,
              number(a, "--batch", 64));
  if (!o.metrics.is_null()) std::printf("squad%s: %s\n", po.v2 ? " v2.0" : "", bert_tools::format_squad_metrics(o.metrics).c_str());
  std::printf("wrote %s/predictions.json, %s/nbest_predictions.json%s\n", dir.c_str(), dir.c_str(),
              po.v2 ? (", " + dir + "/null_odds.json").c_str() : "");
  return 0;
}

int run_conll(const Args& a, const bert_tools::InitWeights& init, const bert::Tokenizer& tokenizer) {
  const json saved_task = model_task(a, init, "token_classification", 0, "token classifier task conll needs");
  const int max_seq = number(a, "--max-seq-length", 128);
  std::vector<std::string> labels;
  for (int i = 0; i < saved_task.value("num_labels", 0); ++i) {
    const json names = saved_task.value("id2label", json::array());
    labels.push_back(i < static_cast<int>(names.size()) ? names[i].get<std::string>() : "LABEL_" + std::to_string(i));
  }
  const std::vector<bert::ConllSentence> sentences = bert::read_conll(a.at("--input"));
  const bert::ConllFeatures f = bert::conll_features(sentences, labels, tokenizer, max_seq);
  bert_session* s = open_session(a, init, saved_task, max_seq);
  if (!s) return 1;
  std::vector<std::vector<std::string>> predicted;
  double secs = 0;
  const bool ok = bert_tools::predict_conll_tags(s, f, labels, number(a, "--batch", 64), predicted, &secs);
  bert_session_destroy(s);
  if (!ok) return 1;
  std::ofstream out(a.at("--output"));
  int64_t cut = 0;
  std::vector<std::vector<std::string>> gold;
  for (size_t i = 0; i < sentences.size(); ++i) {
    const bert::ConllSentence& sentence = sentences[i];
    cut += static_cast<int64_t>(sentence.words.size() - predicted[i].size());
    gold.push_back(sentence.tags);
    predicted[i].resize(sentence.words.size(), "O");  // words past the sequence length
    for (size_t w = 0; w < sentence.words.size(); ++w) out << sentence.words[w] << ' ' << predicted[i][w] << '\n';
    out << '\n';
  }
  write_or_fail(out, a.at("--output"));
  std::printf("%s: %d sentences, %.1f sequences/s (seq %d, batch %d)\n", a.at("--input").c_str(), f.count,
              f.count / secs, max_seq, number(a, "--batch", 64));
  if (cut) std::printf("%lld words past %d pieces were tagged O\n", static_cast<long long>(cut), max_seq - 2);
  const bert::EntityScores e = bert::entity_scores(gold, predicted);
  std::printf("conll: %s (%lld entities)\n",
              bert_tools::format_metrics({{"f1", e.f1}, {"precision", e.precision}, {"recall", e.recall}}).c_str(),
              static_cast<long long>(e.gold));
  std::printf("wrote %s\n", a.at("--output").c_str());
  return 0;
}

int run(const Args& a) {
  for (const char* key : {"--model", "--task", "--vocab", "--input", "--output"}) {
    if (!a.count(key)) {
      std::fprintf(stderr, "error: %s is required\n", key);
      return usage();
    }
  }
  const std::string task = a.at("--task");
  const bool squad = task == "squad", conll = task == "conll";
  if (!squad && !conll) bert::glue_task(task);  // an unknown name fails before the model is read
  const std::string import_to = squad ? a.at("--output") + "/model.imported.h5" : a.at("--output") + ".imported.h5";
  if (squad) std::filesystem::create_directories(a.at("--output"));
  const bert_tools::InitWeights init = bert_tools::resolve_init_weights(a.at("--model"), import_to);
  const bert::Vocab vocab = bert::Vocab::load(a.at("--vocab"));
  bert::TokenizerOptions topt;
  topt.lower_case = a.count("--lower-case") ? bert_tools::bool_option("--lower-case", a.at("--lower-case"))
                                             : !vocab.has_upper_case();
  const bert::Tokenizer tokenizer(vocab, topt);
  if (squad) return run_squad(a, init, tokenizer);
  if (conll) return run_conll(a, init, tokenizer);
  return run_glue(a, init, tokenizer);
}

}  // namespace

int main(int argc, char** argv) {
  if (bert_tools::asks_for_help(argc, argv)) return usage(stdout);
  static const std::set<std::string> known = {
      "--model", "--task", "--vocab", "--input", "--output", "--max-seq-length", "--batch", "--threads", "--lower-case",
      "--device", "--precision", "--doc-stride", "--max-query-length", "--n-best", "--max-answer-length",
      "--null-score-diff-threshold"};
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (!known.count(key)) {
      std::fprintf(stderr, "error: unknown option '%s'\n", key.c_str());
      return usage();
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: %s needs a value\n", key.c_str());
      return usage();
    }
    args[key] = argv[i + 1];
  }
  try {
    return bert_tools::finish(run(args));
  } catch (const std::exception& e) {  // bert::Error included
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
