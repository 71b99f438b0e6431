// bert-finetune CONFIG.json: fine-tunes a pretrained BERT on a GLUE task (sequence
// classification / regression; DATA_DIR/train.tsv and the task's dev file) or, with task "conll",
// on CoNLL token files (token classification, BIO tags; DATA_DIR/train.txt and dev.txt, scored
// by entity-level F1) or, with task "squad" (alias "question_answering"), on SQuAD v1.1/v2.0 JSON
// files (extractive QA: train_file and dev_file; windows of max_seq_length 384 every doc_stride 128
// pieces, questions cut to max_query_length 64; dev predictions written to output_dir and scored
// with the official EM/F1) through the C ABI. The config is the session schema (README.md) plus a
// "finetune" section:
//   {"finetune": {"task": "sst-2", "data_dir": "glue/SST-2", "vocab": "vocab.txt", "epochs": 3,
//                 "output_dir": "out", "lower_case": true, "eval_batch": 64},
//    "train": {"init_checkpoint": "pretrained.h5 or an HF folder", "micro_batch": 32, "lr": 5e-5, ...},
//    "data": {"max_seq_length": 128}}
// "model" defaults to the init checkpoint's; the task head, the step count (epochs x batches, or
// train.steps, which also stops the run there: DLE's --max_steps), AdamW with linear warmup and
// decay (DLE's fine-tuning defaults) are filled in. Prints progress (log.metrics: DLLogger
// records), evaluates on the dev file after each epoch and every train.eval_every steps (the
// task's metric; the predictions written to output_dir), and checkpoints output_dir/epoch_<n>.h5
// and output_dir/final.h5. Under a launcher each step's rows and the dev set are dealt to the
// ranks, rank 0 printing and writing. --eval-only and --predict-only train nothing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "command_line.h"
#include "core/error.h"
#include "dist/launch.h"
#include "conll_task.h"
#include "tasks/conll.h"
#include "finetune_common.h"
#include "metrics_log.h"
#include "squad_task.h"
#include "tool_common.h"

namespace {

using bert_tools::failed;
using nlohmann::json;

constexpr const char* kUsage =
    "usage: bert-finetune CONFIG.json [--eval-only | --predict-only]\n"
    "  the session config plus {\"finetune\": {\"task\": NAME, \"data_dir\": DIR, \"vocab\": FILE,\n"
    "  \"epochs\": N, \"output_dir\": DIR, \"lower_case\": BOOL, \"eval_batch\": N}} (README.md);\n"
    "  task \"squad\": \"train_file\", \"dev_file\" (SQuAD JSON) instead of data_dir, and optionally\n"
    "  \"doc_stride\", \"max_query_length\", \"n_best\", \"max_answer_length\", \"null_score_diff_threshold\"\n"
    "  train.steps: the schedule's length, and the run stops there if the epochs last longer\n"
    "  (DLE's --max_steps); without it the schedule spans the epochs\n"
    "  learning rate: AdamW, lr 5e-5, warmup_proportion 0.1, then DLE's decay (decay_degree 1),\n"
    "  whose last step runs at lr 0; train.lr_schedule \"linear\" is Hugging Face's Trainer\n"
    "  schedule instead (get_linear_schedule_with_warmup: the first step at 0, the last above 0)\n"
    "  the dev set is evaluated after each epoch and every train.eval_every steps (or\n"
    "  train.eval_every_samples samples); log.metrics: a DLLogger file of the logged steps and\n"
    "  evaluations (step [epoch, step])\n"
    "  each evaluation writes the dev set's predictions to output_dir (predictions.tsv for GLUE,\n"
    "  predictions.txt for CoNLL, predictions.json and nbest_predictions.json for SQuAD)\n"
    "  --eval-only: no training; the dev set's metrics and predictions of train.init_checkpoint\n"
    "  --predict-only: no training, no scoring; the predictions of finetune.predict_file (a file\n"
    "  that may have no labels or answers, e.g. GLUE's test.tsv; default: the dev file)\n"
    "  under mpirun/torchrun/Slurm each step's rows (micro_batch x accumulation_steps per rank) are\n"
    "  dealt to the ranks and the gradients averaged; the dev set is dealt too and rank 0 writes\n";

template <typename T>
T get(const json& section, const char* key, const T& fallback) {
  if (!section.contains(key)) return fallback;
  try {
    return section.at(key).get<T>();
  } catch (const json::exception&) {
    bert::fail(bert::Code::config, "config key 'finetune.", key, "' has the wrong type");
  }
}

// One evaluation of the dev set: its metrics as text and as values (for log.metrics).
struct Evaluation {
  std::string text;
  json values = json::object();
  bert_tools::InferTiming timing;
};

// A task's training and dev sets: how to cut a training batch, and how to score the dev set.
struct TaskData {
  int train_count = 0, dev_count = 0;
  json task_section;    // the session config's "task"
  std::string summary;  // "sst-2: 100 train / 20 dev examples (dev.tsv)"
  std::function<bert_batch(const std::vector<int32_t>& rows, bert_tools::BatchStorage& storage)> train_batch;
  // The evaluation set's predictions (COLLECTIVE: the rows are dealt to the ranks), scored when
  // the set is the dev set, and written to output_dir with `write` (rank 0). Returns false after
  // printing the error of a failed call.
  std::function<bool(bert_session* s, int chunk, bool write, Evaluation& e)> evaluate;
};

// Which file the evaluations read: the dev file, scored; or (--predict-only) a file that may have
// no labels (finetune.predict_file, else the dev file), predicted but not scored.
struct EvalSet {
  std::string path;
  bool score = true;
  std::string name() const { return std::filesystem::path(path).filename().string(); }
};

TaskData glue_data(const bert::GlueTask& task, const std::string& dir, const EvalSet& eval,
                   const bert::Tokenizer& tokenizer, int max_seq, const std::string& out_dir) {
  auto train = std::make_shared<bert_tools::GlueSet>(bert_tools::load_glue_set(task, dir + "/train.tsv", tokenizer, max_seq));
  auto dev = std::make_shared<bert_tools::GlueSet>(bert_tools::load_glue_set(task, eval.path, tokenizer, max_seq));
  TaskData d;
  d.train_count = train->features.count;
  d.dev_count = dev->features.count;
  d.task_section = {{"type", "sequence_classification"}, {"num_labels", task.num_labels()}};
  if (!task.regression()) d.task_section["id2label"] = task.labels;
  d.summary = task.name + ": " + std::to_string(train->features.count) + " train / " +
              std::to_string(dev->features.count) + " dev examples (" + eval.name() + ")";
  d.train_batch = [train, task](const std::vector<int32_t>& rows, bert_tools::BatchStorage& st) {
    return bert_tools::make_batch(train->features, rows, task.regression(), true, st);
  };
  d.evaluate = [dev, task, eval, out_dir](bert_session* s, int chunk, bool write, Evaluation& e) {
    std::vector<float> logits;
    if (!bert_tools::infer_logits(s, dev->features, task.num_labels(), chunk, logits, &e.timing)) return false;
    if (write) bert_tools::write_glue_predictions(task, *dev, logits, out_dir + "/predictions.tsv");
    e.text = eval.name() + " (" + std::to_string(dev->features.count) + " examples): ";
    if (eval.score) {
      const auto metrics = bert_tools::glue_metrics(task, *dev, logits);
      for (const auto& [name, value] : metrics) e.values[name] = value;
      e.text += bert_tools::format_metrics(metrics);
    } else {
      e.text += "predictions in " + out_dir + "/predictions.tsv";
    }
    return true;
  };
  return d;
}

TaskData conll_data(const std::string& dir, const EvalSet& eval, const bert::Tokenizer& tokenizer, int max_seq,
                    const std::string& out_dir) {
  const std::vector<bert::ConllSentence> train_s = bert::read_conll(dir + "/train.txt");
  auto dev_s = std::make_shared<std::vector<bert::ConllSentence>>(bert::read_conll(eval.path));
  std::vector<bert::ConllSentence> all = train_s;
  all.insert(all.end(), dev_s->begin(), dev_s->end());
  const std::vector<std::string> labels = bert::conll_labels(all);
  auto train = std::make_shared<bert::ConllFeatures>(bert::conll_features(train_s, labels, tokenizer, max_seq));
  auto dev = std::make_shared<bert::ConllFeatures>(bert::conll_features(*dev_s, labels, tokenizer, max_seq));
  TaskData d;
  d.train_count = train->count;
  d.dev_count = dev->count;
  d.task_section = {{"type", "token_classification"}, {"num_labels", labels.size()}, {"id2label", labels}};
  d.summary = "conll: " + std::to_string(train->count) + " train / " + std::to_string(dev->count) +
              " dev sentences (" + eval.name() + "), " + std::to_string(labels.size()) + " tags";
  d.train_batch = [train](const std::vector<int32_t>& rows, bert_tools::BatchStorage& st) {
    return bert_tools::conll_batch(*train, rows, true, st);
  };
  d.evaluate = [dev, dev_s, labels, eval, out_dir](bert_session* s, int chunk, bool write, Evaluation& ev) {
    std::vector<std::vector<std::string>> gold, predicted;
    if (!bert_tools::predict_conll_tags(s, *dev, labels, chunk, predicted, &ev.timing)) return false;
    for (size_t i = 0; i < predicted.size(); ++i) {  // scored on the words that fit, as in training
      const std::vector<std::string>& tags = (*dev_s)[i].tags;
      gold.emplace_back(tags.begin(), tags.begin() + predicted[i].size());
    }
    const bert::EntityScores e = bert::entity_scores(gold, predicted);
    if (write) bert_tools::write_conll_predictions(*dev_s, predicted, out_dir + "/predictions.txt");
    ev.text = eval.name() + " (" + std::to_string(dev->count) + " sentences";
    if (eval.score) {
      const std::vector<std::pair<std::string, double>> metrics = {{"f1", e.f1}, {"precision", e.precision}, {"recall", e.recall}};
      for (const auto& [name, value] : metrics) ev.values[name] = value;
      ev.text += ", " + std::to_string(e.gold) + " entities): " + bert_tools::format_metrics(metrics);
    } else {
      ev.text += "): predictions in " + out_dir + "/predictions.txt";
    }
    return true;
  };
  return d;
}

// SQuAD: training windows with answer positions; the dev file's predictions (written to
// out_dir) scored with the official EM/F1.
TaskData squad_data(const json& ft, const EvalSet& eval, const bert::Tokenizer& tokenizer, int max_seq,
                    const std::string& out_dir) {
  const std::string train_file = get<std::string>(ft, "train_file", "");
  BERT_CHECK(!train_file.empty(), bert::Code::config, "task squad needs config key 'finetune.train_file' (SQuAD JSON)");
  bert::SquadFeatureOptions fo;
  fo.max_seq_length = max_seq;
  fo.doc_stride = get<int>(ft, "doc_stride", 128);
  fo.max_query_length = get<int>(ft, "max_query_length", 64);
  bert::SquadPredictionOptions po;
  po.n_best = get<int>(ft, "n_best", 20);
  po.max_answer_length = get<int>(ft, "max_answer_length", 30);
  po.null_score_diff_threshold = get<double>(ft, "null_score_diff_threshold", 0.0);
  auto train = std::make_shared<bert_tools::SquadSet>(bert_tools::load_squad_set(train_file, tokenizer, fo, true));
  auto dev = std::make_shared<bert_tools::SquadSet>(bert_tools::load_squad_set(eval.path, tokenizer, fo, false));
  BERT_CHECK(train->features.count > 0, bert::Code::data, "SQuAD file '", train_file, "' gives no training windows");
  po.v2 = dev->file.v2;
  TaskData d;
  d.train_count = train->features.count;
  d.dev_count = dev->features.count;
  d.task_section = {{"type", "question_answering"}, {"num_labels", 2}};
  d.summary = "squad" + std::string(po.v2 ? " v2.0" : "") + ": " + std::to_string(train->file.examples.size()) +
              " train questions (" + std::to_string(train->features.count) + " windows) / " +
              std::to_string(dev->file.examples.size()) + " dev questions (" + std::to_string(dev->features.count) +
              " windows)";
  d.train_batch = [train](const std::vector<int32_t>& rows, bert_tools::BatchStorage& st) {
    return bert_tools::squad_batch(train->features, rows, true, st);
  };
  const bert::Tokenizer* tok = &tokenizer;
  d.evaluate = [dev, eval, po, out_dir, tok](bert_session* s, int chunk, bool write, Evaluation& e) {
    std::vector<float> logits;
    if (!bert_tools::infer_squad_logits(s, dev->features, chunk, logits, &e.timing)) return false;
    const bert_tools::SquadOutcome o = bert_tools::squad_outcome(*dev, logits, *tok, po);
    if (write) bert::write_squad_predictions(o.predictions, po.v2, out_dir);
    e.text = eval.path + " (" + std::to_string(dev->file.examples.size()) + " questions): ";
    if (eval.score) {
      if (!o.metrics.is_null()) e.values = o.metrics;
      e.text += (o.metrics.is_null() ? "no answers to score" : bert_tools::format_squad_metrics(o.metrics)) + ", ";
    }
    e.text += "predictions in " + out_dir + "/predictions.json";
    return true;
  };
  return d;
}

// A fine-tuning session and what its loop shares.
struct Run {
  bert_session* session;
  bert_tools::Ranks ranks;
  const TaskData& data;
  int eval_batch;
  bert_tools::MetricsLog metrics = {};  // log.metrics, rank 0

  // Evaluates the dev set after `step` of epoch `epoch` (0, 0: before any training), at the
  // epoch's end or within it: the line and the metrics record on rank 0. COLLECTIVE.
  bool evaluate(int epoch, int64_t step, bool epoch_end) {
    Evaluation e;
    if (!data.evaluate(session, eval_batch, ranks.leader(), e)) return false;
    if (!ranks.leader()) return true;
    const double rate = e.timing.seconds > 0 ? data.dev_count / e.timing.seconds : 0.0;
    if (epoch == 0) std::printf("eval %s (%.1f seq/s)\n", e.text.c_str(), rate);
    else if (epoch_end) std::printf("epoch %d eval %s (%.1f seq/s)\n", epoch, e.text.c_str(), rate);
    else std::printf("epoch %d step %lld eval %s (%.1f seq/s)\n", epoch, static_cast<long long>(step), e.text.c_str(), rate);
    std::fflush(stdout);
    json values = {{"eval_seconds", e.timing.seconds}};
    for (const auto& [name, value] : e.values.items()) values["eval_" + name] = value;
    metrics.log(json::array({epoch, step}), values);
    return true;
  }
};

// The rows of one optimizer step on this rank: the step's rows (up to micro-batch x
// accumulation x ranks) dealt in equal slices, as a DistributedSampler does; a rank left without
// rows in the last step gets that step's last row again (the optimizer averages over ranks, so
// every rank must bring a batch).
std::vector<int32_t> rows_of_rank(const std::vector<int32_t>& order, size_t begin, size_t global, bert_tools::Ranks r) {
  const size_t end = std::min(order.size(), begin + global), n = end - begin;
  const size_t share = (n + r.world - 1) / r.world, first = begin + std::min(n, share * r.rank);
  std::vector<int32_t> rows(order.begin() + first, order.begin() + std::min(end, first + share));
  if (rows.empty()) rows.push_back(order[end - 1]);
  return rows;
}

// The epochs: steps dealt to the ranks, the loss (averaged over the ranks) every train.log_every
// steps, the dev set evaluated every train.eval_every steps (or eval_every_samples samples) and
// after each epoch, a checkpoint after each epoch, final.h5 at the end.
int train_epochs(Run& run, const json& train, int epochs, int64_t total, const std::string& out_dir) {
  bert_session* s = run.session;
  const bert_tools::Ranks ranks = run.ranks;
  const size_t global = static_cast<size_t>(train.value("micro_batch", 32)) * train.value("accumulation_steps", 1) * ranks.world;
  const int64_t steps_per_epoch = (run.data.train_count + global - 1) / global;
  const int64_t run_steps = std::min(total, steps_per_epoch * epochs);
  if (ranks.leader()) {
    std::printf("fine-tuning %s, %lld steps of %zu sequences%s (%d epochs of %lld steps%s)\n", run.data.summary.c_str(),
                static_cast<long long>(run_steps), global,
                ranks.world > 1 ? (" on " + std::to_string(ranks.world) + " ranks").c_str() : "", epochs,
                static_cast<long long>(steps_per_epoch), total < steps_per_epoch * epochs ? ", cut at train.steps" : "");
  }
  std::vector<int32_t> order(run.data.train_count);
  bert_tools::BatchStorage storage;
  const int log_every = train.value("log_every", 10);
  const int64_t eval_every = train.value("eval_every", int64_t{0});
  const int64_t eval_every_samples = train.value("eval_every_samples", int64_t{0});
  int64_t step = 0;
  int epochs_run = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::mt19937_64 rng(train.value("seed", 12345) + epoch);
    std::shuffle(order.begin(), order.end(), rng);
    const auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t seen = 0, loss_steps = 0;
    for (size_t begin = 0; begin < order.size() && step < run_steps; begin += global) {
      const bert_batch b = run.data.train_batch(rows_of_rank(order, begin, global, ranks), storage);
      bert_step_result r;
      bert_step_result_init(&r);
      if (failed(bert_step(s, &b, &r), "bert_step")) return 1;
      ++step;
      seen += static_cast<int64_t>(std::min(global, order.size() - begin));
      loss_sum += r.loss;
      ++loss_steps;
      const bool epoch_end = begin + global >= order.size() || step == run_steps;
      if (step % log_every == 0 || epoch_end) {
        float loss = static_cast<float>(loss_sum / loss_steps);
        if (ranks.world > 1 && failed(bert_allreduce_host(s, &loss, 1, BERT_REDUCE_MEAN), "mean loss")) return 1;
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (ranks.leader()) {
          std::printf("epoch %d/%d  step %lld/%lld  loss %.4f  lr %.3e  %.1f seq/s\n", epoch, epochs,
                      static_cast<long long>(step), static_cast<long long>(run_steps), loss, r.learning_rate,
                      seen / secs);
          std::fflush(stdout);
          run.metrics.log(json::array({epoch, step}), {{"samples", step * static_cast<int64_t>(global)},
                                                      {"loss", loss},
                                                      {"learning_rate", r.learning_rate},
                                                      {"sequences_per_second", seen / secs}});
        }
        loss_sum = 0;
        loss_steps = 0;
      }
      if (!epoch_end && bert_tools::evaluation_due(step, eval_every, eval_every_samples, static_cast<long long>(global)) &&
          !run.evaluate(epoch, step, false)) {
        return 1;
      }
    }
    if (!run.evaluate(epoch, step, true)) return 1;
    const std::string path = out_dir + "/epoch_" + std::to_string(epoch) + ".h5";
    if (failed(bert_checkpoint(s, path.c_str()), "bert_checkpoint")) return 1;
    epochs_run = epoch;
    if (step >= run_steps) break;
  }
  // The last epoch's checkpoint holds the final state: final.h5 is a second name for it (a
  // BERT-large state is 4 GB), written anew (by every rank: a checkpoint is collective) only
  // where rank 0's file system cannot link.
  const std::string final_path = out_dir + "/final.h5", last_path = out_dir + "/epoch_" + std::to_string(epochs_run) + ".h5";
  float link_failed = 0;
  if (ranks.leader()) {
    std::error_code ec;
    std::filesystem::remove(final_path, ec);
    std::filesystem::create_hard_link(last_path, final_path, ec);
    link_failed = ec ? 1.0f : 0.0f;
  }
  if (ranks.world > 1 && failed(bert_allreduce_host(s, &link_failed, 1, BERT_REDUCE_MAX), "final.h5")) return 1;
  if (link_failed > 0 && failed(bert_checkpoint(s, final_path.c_str()), "bert_checkpoint")) return 1;
  if (ranks.leader()) std::printf("saved %s\n", final_path.c_str());
  return 0;
}

// What bert-finetune does: train (evaluating as it goes), or only evaluate or predict with
// train.init_checkpoint (DLE's run_squad.py --do_eval / --do_predict without --do_train).
enum class Mode { train, eval_only, predict_only };

int run(const std::string& config_path, Mode mode) {
  json cfg;
  try {
    cfg = json::parse(bert_tools::read_file_or_exit(config_path));
  } catch (const json::exception& e) {
    bert::fail(bert::Code::config, "'", config_path, "' is not valid JSON: ", e.what());
  }
  BERT_CHECK(cfg.is_object() && cfg.contains("finetune") && cfg["finetune"].is_object(), bert::Code::config,
             "'", config_path, "' needs a \"finetune\" section (task, data_dir, vocab)");
  const json ft = cfg["finetune"];
  cfg.erase("finetune");
  for (const auto& [key, value] : ft.items()) {
    static const std::vector<std::string> known = {"task", "data_dir", "vocab", "epochs", "output_dir", "lower_case",
                                                   "eval_batch", "train_file", "dev_file", "doc_stride",
                                                   "max_query_length", "n_best", "max_answer_length",
                                                   "null_score_diff_threshold", "predict_file"};
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      bert::fail(bert::Code::config, "unknown config key 'finetune.", key, "'");
    }
  }
  const std::string task_name = get<std::string>(ft, "task", "");
  const bool conll = task_name == "conll", squad = task_name == "squad" || task_name == "question_answering";
  const bert::GlueTask task = conll || squad ? bert::GlueTask{} : bert::glue_task(task_name);
  const std::string data_dir = get<std::string>(ft, "data_dir", "");
  const std::string vocab_path = get<std::string>(ft, "vocab", "");
  const std::string out_dir = get<std::string>(ft, "output_dir", "finetune_out");
  const int epochs = get<int>(ft, "epochs", 3);
  BERT_CHECK((squad || !data_dir.empty()) && !vocab_path.empty(), bert::Code::config,
             "config keys 'finetune.data_dir' and 'finetune.vocab' are required");
  BERT_CHECK(epochs >= 1, bert::Code::config, "config key 'finetune.epochs' = ", epochs, " must be at least 1");
  std::filesystem::create_directories(out_dir);

  // The ranks the launcher started (the schedule's length depends on them before the session exists).
  const bert::LaunchPlan launch = bert::resolve_launch(bert::DistRequest{}, bert::process_env());
  json& train = cfg["train"];
  if (!train.is_object()) train = json::object();
  if (train.contains("init_checkpoint")) {
    const bert_tools::InitWeights init =
        bert_tools::resolve_init_weights(train["init_checkpoint"].get<std::string>(), out_dir + "/init_imported.h5");
    train["init_checkpoint"] = init.checkpoint;
    if (!cfg.contains("model")) cfg["model"] = init.config.at("model");
  }
  const int max_seq = cfg.value("data", json::object()).value("max_seq_length", squad ? 384 : 128);
  const bert::Vocab vocab = bert::Vocab::load(vocab_path);
  bert::TokenizerOptions topt;
  topt.lower_case = get<bool>(ft, "lower_case", !vocab.has_upper_case());
  const bert::Tokenizer tokenizer(vocab, topt);
  EvalSet eval{squad ? get<std::string>(ft, "dev_file", "") : data_dir + "/" + (conll ? "dev.txt" : task.dev_file)};
  if (mode == Mode::predict_only) {
    eval = {get<std::string>(ft, "predict_file", eval.path), false};
  }
  BERT_CHECK(!eval.path.empty(), bert::Code::config, "task squad needs config key 'finetune.dev_file' (SQuAD JSON)");
  const TaskData data = squad   ? squad_data(ft, eval, tokenizer, max_seq, out_dir)
                        : conll ? conll_data(data_dir, eval, tokenizer, max_seq, out_dir)
                                : glue_data(task, data_dir, eval, tokenizer, max_seq, out_dir);

  const int micro = train.value("micro_batch", 32);
  const int accumulation = train.value("accumulation_steps", 1);
  const int64_t per_step = static_cast<int64_t>(micro) * accumulation * launch.world_size;
  const int64_t steps_per_epoch = (data.train_count + per_step - 1) / per_step;
  // train.steps bounds the run (DLE's --max_steps: the schedule's length, the run stopping there
  // or at the end of its epochs); without it the schedule spans the epochs.
  const int64_t total = train.contains("steps") ? train["steps"].get<int64_t>() : steps_per_epoch * epochs;
  BERT_CHECK(total >= 1, bert::Code::config, "config key 'train.steps' = ", total, " must be at least 1");
  cfg["task"] = data.task_section;
  train["micro_batch"] = micro;
  train["steps"] = total;
  if (!train.contains("optimizer")) train["optimizer"] = "adamw";
  if (!train.contains("lr")) train["lr"] = 5e-5;
  if (!train.contains("decay_degree")) train["decay_degree"] = 1.0;  // linear decay
  if (!train.contains("warmup_proportion") && !train.contains("warmup_steps")) train["warmup_proportion"] = 0.1;
  if (!cfg.contains("data")) cfg["data"] = json::object();
  cfg["data"]["max_seq_length"] = max_seq;
  if (!cfg["data"].contains("max_predictions_per_seq")) cfg["data"]["max_predictions_per_seq"] = 0;

  bert_session* s = nullptr;
  if (failed(bert_session_create(cfg.dump().c_str(), nullptr, &s), "bert_session_create")) return 1;
  const bert_tools::Ranks ranks = bert_tools::session_ranks(s);
  if (ranks.world != launch.world_size) {
    std::fprintf(stderr, "error: the launcher started %d ranks but the session has %d (dist.backend): each rank would "
                 "train on every row\n", launch.world_size, ranks.world);
    bert_session_destroy(s);
    return 1;
  }
  Run run{s, ranks, data, get<int>(ft, "eval_batch", 64)};
  const std::string metrics_path = cfg.value("log", json::object()).value("metrics", "");
  if (ranks.leader() && !run.metrics.open(metrics_path)) {
    std::fprintf(stderr, "error: config key 'log.metrics': cannot open '%s' for writing\n", metrics_path.c_str());
    bert_session_destroy(s);
    return 1;
  }
  const int status = mode != Mode::train ? (run.evaluate(0, 0, false) ? 0 : 1) : train_epochs(run, train, epochs, total, out_dir);
  bert_session_destroy(s);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (bert_tools::asks_for_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const bert_tools::CommandLine args(
      "bert-finetune", kUsage, argc, argv, 1,
      {.flags = {"--eval-only", "--predict-only"}, .min_positional = 1, .max_positional = 1,
       .positional_name = "CONFIG.json"});
  if (args.flag("--eval-only") && args.flag("--predict-only")) {
    std::fprintf(stderr, "error: --eval-only and --predict-only exclude each other\n%s", kUsage);
    return 2;
  }
  const Mode mode = args.flag("--eval-only") ? Mode::eval_only : args.flag("--predict-only") ? Mode::predict_only : Mode::train;
  try {
    return bert_tools::finish(run(args.positional()[0], mode));
  } catch (const std::exception& e) {  // bert::Error included
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
