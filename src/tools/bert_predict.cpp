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
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "core/error.h"
#include "command_line.h"
#include "conll_task.h"
#include "finetune_common.h"
#include "squad_task.h"
#include "tool_common.h"

namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "usage: bert-predict --model CKPT|HF_DIR --task NAME --vocab FILE --input FILE --output PATH\n"
    "                    [--max-seq-length 128 (squad: 384)] [--batch 64] [--threads N] [--lower-case 0|1]\n"
    "                    [--device cpu|cuda|cuda:N (cpu)] [--precision fp32|bf16|fp16 (fp32)]\n"
    "  NAME: a GLUE task (TSV in, TSV out), squad (SQuAD JSON in, a directory of predictions out)\n"
    "  or conll (CoNLL file in and out); squad also takes [--doc-stride 128] [--max-query-length 64]\n"
    "  [--n-best 20] [--max-answer-length 30] [--null-score-diff-threshold 0.0]\n"
    "  under mpirun/torchrun/Slurm the rows are dealt to the ranks and rank 0 writes every prediction\n";


// The command line, read and checked before anything runs.
struct Options {
  std::string model, task, vocab, input, output, device, precision;
  int max_seq_length = 0;  // 0: the task's default (squad 384, else 128)
  int batch = 64, threads = 0;  // 0: the session's default
  int lower_case = -1;          // -1: from the vocabulary
  int doc_stride = 128, max_query_length = 64, n_best = 20, max_answer_length = 30;
  double null_score_diff_threshold = 0.0;
};

Options parse_options(int argc, char** argv) {
  const bert_tools::CommandLine a(
      "bert-predict", kUsage, argc, argv, 1,
      {.with_value = {"--model", "--task", "--vocab", "--input", "--output", "--max-seq-length", "--batch", "--threads",
                      "--lower-case", "--device", "--precision", "--doc-stride", "--max-query-length", "--n-best",
                      "--max-answer-length", "--null-score-diff-threshold"}});
  constexpr int kMax = 1 << 20;
  Options o;
  o.model = a.required("--model");
  o.task = a.required("--task");
  o.vocab = a.required("--vocab");
  o.input = a.required("--input");
  o.output = a.required("--output");
  o.device = a.text("--device");
  o.precision = a.text("--precision");
  o.max_seq_length = static_cast<int>(a.integer("--max-seq-length", 0, 3, kMax));
  o.batch = static_cast<int>(a.integer("--batch", o.batch, 1, kMax));
  o.threads = static_cast<int>(a.integer("--threads", 0, 1, 4096));
  o.lower_case = a.has("--lower-case") ? a.boolean("--lower-case", false) : -1;
  o.doc_stride = static_cast<int>(a.integer("--doc-stride", o.doc_stride, 1, kMax));
  o.max_query_length = static_cast<int>(a.integer("--max-query-length", o.max_query_length, 1, kMax));
  o.n_best = static_cast<int>(a.integer("--n-best", o.n_best, 1, kMax));
  o.max_answer_length = static_cast<int>(a.integer("--max-answer-length", o.max_answer_length, 1, kMax));
  o.null_score_diff_threshold = a.number("--null-score-diff-threshold", 0.0, -1e9, 1e9);
  return o;
}

// The model's weights and recorded task, checked against the head the task needs.
json model_task(const Options& o, const bert_tools::InitWeights& init, const std::string& type, int num_labels,
                const std::string& what) {
  const json saved = init.config.value("task", json::object());
  BERT_CHECK(saved.value("type", "") == type && (num_labels == 0 || saved.value("num_labels", 0) == num_labels),
             bert::Code::invalid_argument, "'", o.model, "' holds a ", saved.dump(), " model, not the ", what);
  return saved;
}

// An inference-only session of the model at `max_seq`; nullptr after printing the error.
bert_session* open_session(const Options& o, const bert_tools::InitWeights& init, const json& task, int max_seq) {
  json cfg = {{"model", init.config.at("model")},
              {"task", task},
              {"mode", "inference"},
              {"train", {{"init_checkpoint", init.checkpoint}, {"micro_batch", o.batch}}},
              {"data", {{"max_seq_length", max_seq}, {"max_predictions_per_seq", 0}}}};
  if (o.threads) cfg["train"]["threads"] = o.threads;
  if (!o.device.empty()) cfg["device"] = o.device;  // the session refuses what it cannot run
  if (!o.precision.empty()) cfg["train"]["precision"] = o.precision;
  bert_session* s = nullptr;
  if (bert_tools::failed(bert_session_create(cfg.dump().c_str(), nullptr, &s), "bert_session_create")) return nullptr;
  return s;
}


int run_glue(const Options& o, const bert_tools::InitWeights& init, const bert::Tokenizer& tokenizer) {
  const bert::GlueTask task = bert::glue_task(o.task);
  const int max_seq = (o.max_seq_length ? o.max_seq_length : 128), batch = o.batch;
  const json saved_task = model_task(o, init, "sequence_classification", task.num_labels(),
                                     std::to_string(task.num_labels()) + "-label sequence classifier task " +
                                         task.name + " needs");
  const bert_tools::GlueSet set = bert_tools::load_glue_set(task, o.input, tokenizer, max_seq);
  bert_session* s = open_session(o, init, saved_task, max_seq);
  if (!s) return 1;
  std::vector<float> logits;
  bert_tools::InferTiming timing;
  const bool ok = bert_tools::infer_logits(s, set.features, task.num_labels(), batch, logits, &timing);
  const bool leader = bert_tools::session_ranks(s).leader();
  bert_session_destroy(s);
  if (!ok) return 1;
  if (!leader) return 0;  // every rank has every prediction: rank 0 writes them

  bert_tools::write_glue_predictions(task, set, logits, o.output);
  std::printf("%s: %d examples, %.1f sequences/s (seq %d, batch %d); %s\n", o.input.c_str(), set.features.count,
              set.features.count / timing.seconds, max_seq, batch, timing.latency().c_str());
  if (set.labelled) {
    std::printf("%s: %s\n", task.name.c_str(), bert_tools::format_metrics(bert_tools::glue_metrics(task, set, logits)).c_str());
  }
  std::printf("wrote %s\n", o.output.c_str());
  return 0;
}

int run_squad(const Options& o, const bert_tools::InitWeights& init, const bert::Tokenizer& tokenizer) {
  const json saved_task = model_task(o, init, "question_answering", 0, "question-answering model task squad needs");
  bert::SquadFeatureOptions fo;
  fo.max_seq_length = (o.max_seq_length ? o.max_seq_length : 384);
  fo.doc_stride = o.doc_stride;
  fo.max_query_length = o.max_query_length;
  bert::SquadPredictionOptions po;
  po.n_best = o.n_best;
  po.max_answer_length = o.max_answer_length;
  po.null_score_diff_threshold = o.null_score_diff_threshold;
  const bert_tools::SquadSet set = bert_tools::load_squad_set(o.input, tokenizer, fo, false);
  po.v2 = set.file.v2;
  const std::string& dir = o.output;
  std::filesystem::create_directories(dir);
  bert_session* s = open_session(o, init, saved_task, fo.max_seq_length);
  if (!s) return 1;
  std::vector<float> logits;
  bert_tools::InferTiming timing;
  const bool ok = bert_tools::infer_squad_logits(s, set.features, o.batch, logits, &timing);
  const bool leader = bert_tools::session_ranks(s).leader();
  bert_session_destroy(s);
  if (!ok) return 1;
  if (!leader) return 0;
  const bert_tools::SquadOutcome outcome = bert_tools::squad_outcome(set, logits, tokenizer, po);
  bert::write_squad_predictions(outcome.predictions, po.v2, dir);
  std::printf("%s: %zu questions, %d windows, %.1f sequences/s (seq %d, batch %d); %s\n", o.input.c_str(),
              set.file.examples.size(), set.features.count, set.features.count / timing.seconds, fo.max_seq_length,
              o.batch, timing.latency().c_str());
  if (!outcome.metrics.is_null()) {
    std::printf("squad%s: %s\n", po.v2 ? " v2.0" : "", bert_tools::format_squad_metrics(outcome.metrics).c_str());
  }
  std::printf("wrote %s/predictions.json, %s/nbest_predictions.json%s\n", dir.c_str(), dir.c_str(),
              po.v2 ? (", " + dir + "/null_odds.json").c_str() : "");
  return 0;
}

int run_conll(const Options& o, const bert_tools::InitWeights& init, const bert::Tokenizer& tokenizer) {
  const json saved_task = model_task(o, init, "token_classification", 0, "token classifier task conll needs");
  const int max_seq = (o.max_seq_length ? o.max_seq_length : 128);
  std::vector<std::string> labels;
  for (int i = 0; i < saved_task.value("num_labels", 0); ++i) {
    const json names = saved_task.value("id2label", json::array());
    labels.push_back(i < static_cast<int>(names.size()) ? names[i].get<std::string>() : "LABEL_" + std::to_string(i));
  }
  const std::vector<bert::ConllSentence> sentences = bert::read_conll(o.input);
  const bert::ConllFeatures f = bert::conll_features(sentences, labels, tokenizer, max_seq);
  bert_session* s = open_session(o, init, saved_task, max_seq);
  if (!s) return 1;
  std::vector<std::vector<std::string>> predicted;
  bert_tools::InferTiming timing;
  const bool ok = bert_tools::predict_conll_tags(s, f, labels, o.batch, predicted, &timing);
  const bool leader = bert_tools::session_ranks(s).leader();
  bert_session_destroy(s);
  if (!ok) return 1;
  if (!leader) return 0;
  const int64_t cut = bert_tools::write_conll_predictions(sentences, predicted, o.output);
  std::vector<std::vector<std::string>> gold;
  for (const bert::ConllSentence& sentence : sentences) gold.push_back(sentence.tags);
  std::printf("%s: %d sentences, %.1f sequences/s (seq %d, batch %d); %s\n", o.input.c_str(), f.count,
              f.count / timing.seconds, max_seq, o.batch, timing.latency().c_str());
  if (cut) std::printf("%lld words past %d pieces were tagged O\n", static_cast<long long>(cut), max_seq - 2);
  const bert::EntityScores e = bert::entity_scores(gold, predicted);
  std::printf("conll: %s (%lld entities)\n",
              bert_tools::format_metrics({{"f1", e.f1}, {"precision", e.precision}, {"recall", e.recall}}).c_str(),
              static_cast<long long>(e.gold));
  std::printf("wrote %s\n", o.output.c_str());
  return 0;
}

int run(const Options& o) {
  const std::string task = o.task;
  const bool squad = task == "squad", conll = task == "conll";
  if (!squad && !conll) bert::glue_task(task);  // an unknown name fails before the model is read
  const std::string import_to = squad ? o.output + "/model.imported.h5" : o.output + ".imported.h5";
  if (squad) std::filesystem::create_directories(o.output);
  const bert_tools::InitWeights init = bert_tools::resolve_init_weights(o.model, import_to);
  const bert::Vocab vocab = bert::Vocab::load(o.vocab);
  bert::TokenizerOptions topt;
  topt.lower_case = o.lower_case >= 0 ? o.lower_case == 1 : !vocab.has_upper_case();
  const bert::Tokenizer tokenizer(vocab, topt);
  if (squad) return run_squad(o, init, tokenizer);
  if (conll) return run_conll(o, init, tokenizer);
  return run_glue(o, init, tokenizer);
}

}  // namespace

int main(int argc, char** argv) {
  if (bert_tools::asks_for_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const Options options = parse_options(argc, argv);
  try {
    return bert_tools::finish(run(options));
  } catch (const std::exception& e) {  // bert::Error included
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
