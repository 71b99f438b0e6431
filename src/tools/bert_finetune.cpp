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
// decay (DLE's fine-tuning defaults) are filled in. Prints
// progress, evaluates on the dev file after each epoch (the task's metric), and checkpoints
// output_dir/epoch_<n>.h5 and output_dir/final.h5.
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
#include "core/error.h"
#include "conll_task.h"
#include "tasks/conll.h"
#include "finetune_common.h"
#include "squad_task.h"
#include "tool_common.h"
#include "tool_help.h"

namespace {

using bert_tools::failed;
using nlohmann::json;

int usage(FILE* out = stderr) {
  std::fprintf(out, "usage: bert-finetune CONFIG.json\n"
                       "  the session config plus {\"finetune\": {\"task\": NAME, \"data_dir\": DIR, \"vocab\": FILE,\n"
                       "  \"epochs\": N, \"output_dir\": DIR, \"lower_case\": BOOL, \"eval_batch\": N}} (README.md);\n"
                       "  task \"squad\": \"train_file\", \"dev_file\" (SQuAD JSON) instead of data_dir, and optionally\n"
                       "  \"doc_stride\", \"max_query_length\", \"n_best\", \"max_answer_length\", \"null_score_diff_threshold\"\n"
                       "  train.steps: the schedule's length, and the run stops there if the epochs last longer\n"
                       "  (DLE's --max_steps); without it the schedule spans the epochs\n"
                       "  learning rate: AdamW, lr 5e-5, warmup_proportion 0.1, then DLE's decay (decay_degree 1),\n"
                       "  whose last step runs at lr 0; train.lr_schedule \"linear\" is Hugging Face's Trainer\n"
                       "  schedule instead (get_linear_schedule_with_warmup: the first step at 0, the last above 0)\n");
  return out == stderr ? 2 : 0;
}

template <typename T>
T get(const json& section, const char* key, const T& fallback) {
  if (!section.contains(key)) return fallback;
  try {
    return section.at(key).get<T>();
  } catch (const json::exception&) {
    bert::fail(bert::Code::config, "config key 'finetune.", key, "' has the wrong type");
  }
}

// A task's training and dev sets: how to cut a training batch, and how to score the dev set.
struct TaskData {
  int train_count = 0, dev_count = 0;
  json task_section;    // the session config's "task"
  std::string summary;  // "sst-2: 100 train / 20 dev examples (dev.tsv)"
  std::function<bert_batch(const std::vector<int32_t>& rows, bert_tools::BatchStorage& storage)> train_batch;
  // The dev set's metrics as text; returns false after printing the error of a failed call.
  std::function<bool(bert_session* s, int chunk, std::string& metrics, double& seconds)> evaluate;
};

TaskData glue_data(const bert::GlueTask& task, const std::string& dir, const bert::Tokenizer& tokenizer, int max_seq) {
  auto train = std::make_shared<bert_tools::GlueSet>(bert_tools::load_glue_set(task, dir + "/train.tsv", tokenizer, max_seq));
  auto dev = std::make_shared<bert_tools::GlueSet>(bert_tools::load_glue_set(task, dir + "/" + task.dev_file, tokenizer, max_seq));
  TaskData d;
  d.train_count = train->features.count;
  d.dev_count = dev->features.count;
  d.task_section = {{"type", "sequence_classification"}, {"num_labels", task.num_labels()}};
  if (!task.regression()) d.task_section["id2label"] = task.labels;
  d.summary = task.name + ": " + std::to_string(train->features.count) + " train / " +
              std::to_string(dev->features.count) + " dev examples (" + task.dev_file + ")";
  d.train_batch = [train, task](const std::vector<int32_t>& rows, bert_tools::BatchStorage& st) {
    return bert_tools::make_batch(train->features, rows, task.regression(), true, st);
  };
  d.evaluate = [dev, task](bert_session* s, int chunk, std::string& metrics, double& seconds) {
    std::vector<float> logits;
    if (!bert_tools::infer_logits(s, dev->features, task.num_labels(), chunk, logits, &seconds)) return false;
    metrics = task.dev_file + " (" + std::to_string(dev->features.count) + " examples): " +
              bert_tools::format_metrics(bert_tools::glue_metrics(task, *dev, logits));
    return true;
  };
  return d;
}

TaskData conll_data(const std::string& dir, const bert::Tokenizer& tokenizer, int max_seq) {
  const std::vector<bert::ConllSentence> train_s = bert::read_conll(dir + "/train.txt");
  auto dev_s = std::make_shared<std::vector<bert::ConllSentence>>(bert::read_conll(dir + "/dev.txt"));
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
              " dev sentences (dev.txt), " + std::to_string(labels.size()) + " tags";
  d.train_batch = [train](const std::vector<int32_t>& rows, bert_tools::BatchStorage& st) {
    return bert_tools::conll_batch(*train, rows, true, st);
  };
  d.evaluate = [dev, dev_s, labels](bert_session* s, int chunk, std::string& metrics, double& seconds) {
    std::vector<std::vector<std::string>> gold, predicted;
    if (!bert_tools::predict_conll_tags(s, *dev, labels, chunk, predicted, &seconds)) return false;
    for (size_t i = 0; i < predicted.size(); ++i) {
      const std::vector<std::string>& tags = (*dev_s)[i].tags;
      gold.emplace_back(tags.begin(), tags.begin() + predicted[i].size());
    }
    const bert::EntityScores e = bert::entity_scores(gold, predicted);
    metrics = "dev.txt (" + std::to_string(dev->count) + " sentences, " + std::to_string(e.gold) +
              " entities): " + bert_tools::format_metrics({{"f1", e.f1}, {"precision", e.precision}, {"recall", e.recall}});
    return true;
  };
  return d;
}

// SQuAD: training windows with answer positions; the dev file's predictions (written to
// out_dir) scored with the official EM/F1.
TaskData squad_data(const json& ft, const bert::Tokenizer& tokenizer, int max_seq, const std::string& out_dir) {
  const std::string train_file = get<std::string>(ft, "train_file", ""), dev_file = get<std::string>(ft, "dev_file", "");
  BERT_CHECK(!train_file.empty() && !dev_file.empty(), bert::Code::config,
             "task squad needs config keys 'finetune.train_file' and 'finetune.dev_file' (SQuAD JSON files)");
  bert::SquadFeatureOptions fo;
  fo.max_seq_length = max_seq;
  fo.doc_stride = get<int>(ft, "doc_stride", 128);
  fo.max_query_length = get<int>(ft, "max_query_length", 64);
  bert::SquadPredictionOptions po;
  po.n_best = get<int>(ft, "n_best", 20);
  po.max_answer_length = get<int>(ft, "max_answer_length", 30);
  po.null_score_diff_threshold = get<double>(ft, "null_score_diff_threshold", 0.0);
  auto train = std::make_shared<bert_tools::SquadSet>(bert_tools::load_squad_set(train_file, tokenizer, fo, true));
  auto dev = std::make_shared<bert_tools::SquadSet>(bert_tools::load_squad_set(dev_file, tokenizer, fo, false));
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
  d.evaluate = [dev, dev_file, po, out_dir, tok](bert_session* s, int chunk, std::string& metrics, double& seconds) {
    std::vector<float> logits;
    if (!bert_tools::infer_squad_logits(s, dev->features, chunk, logits, &seconds)) return false;
    const bert_tools::SquadOutcome o = bert_tools::squad_outcome(*dev, logits, *tok, po);
    bert::write_squad_predictions(o.predictions, po.v2, out_dir);
    metrics = dev_file + " (" + std::to_string(dev->file.examples.size()) + " questions): " +
              (o.metrics.is_null() ? "no answers to score" : bert_tools::format_squad_metrics(o.metrics)) +
              ", predictions in " + out_dir + "/predictions.json";
    return true;
  };
  return d;
}

int run(const std::string& config_path) {
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
                                                   "null_score_diff_threshold"};
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
  const TaskData data = squad   ? squad_data(ft, tokenizer, max_seq, out_dir)
                        : conll ? conll_data(data_dir, tokenizer, max_seq)
                                : glue_data(task, data_dir, tokenizer, max_seq);

  const int micro = train.value("micro_batch", 32);
  const int accumulation = train.value("accumulation_steps", 1);
  const int per_step = micro * accumulation;
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
  const int64_t run_steps = std::min(total, steps_per_epoch * epochs);
  std::printf("fine-tuning %s, %lld steps of %d sequences (%d epochs of %lld steps%s)\n", data.summary.c_str(),
              static_cast<long long>(run_steps), per_step, epochs, static_cast<long long>(steps_per_epoch),
              total < steps_per_epoch * epochs ? ", cut at train.steps" : "");
  std::vector<int32_t> order(data.train_count);
  bert_tools::BatchStorage storage;
  const int log_every = train.value("log_every", 10);
  const int eval_batch = get<int>(ft, "eval_batch", 64);
  int64_t step = 0;
  int status = 0, epochs_run = 0;
  for (int epoch = 1; epoch <= epochs && status == 0; ++epoch) {
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::mt19937_64 rng(train.value("seed", 12345) + epoch);
    std::shuffle(order.begin(), order.end(), rng);
    const auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t seen = 0, loss_steps = 0;
    for (size_t begin = 0; begin < order.size() && step < run_steps; begin += per_step) {
      std::vector<int32_t> rows(order.begin() + begin, order.begin() + std::min(order.size(), begin + per_step));
      const bert_batch b = data.train_batch(rows, storage);
      bert_step_result r;
      bert_step_result_init(&r);
      if (failed(bert_step(s, &b, &r), "bert_step")) {
        status = 1;
        break;
      }
      ++step;
      seen += rows.size();
      loss_sum += r.loss;
      ++loss_steps;
      if (step % log_every == 0 || begin + per_step >= order.size() || step == run_steps) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("epoch %d/%d  step %lld/%lld  loss %.4f  lr %.3e  %.1f seq/s\n", epoch, epochs,
                    static_cast<long long>(step), static_cast<long long>(run_steps),
                    loss_sum / loss_steps, r.learning_rate, seen / secs);
        std::fflush(stdout);
        loss_sum = 0;
        loss_steps = 0;
      }
    }
    if (status) break;
    std::string metrics;
    double secs = 0;
    if (!data.evaluate(s, eval_batch, metrics, secs)) {
      status = 1;
      break;
    }
    std::printf("epoch %d eval %s (%.1f seq/s)\n", epoch, metrics.c_str(), secs > 0 ? data.dev_count / secs : 0.0);
    const std::string path = out_dir + "/epoch_" + std::to_string(epoch) + ".h5";
    if (failed(bert_checkpoint(s, path.c_str()), "bert_checkpoint")) status = 1;
    epochs_run = epoch;
    std::fflush(stdout);
    if (step >= run_steps) break;
  }
  if (status == 0) {
    // The last epoch's checkpoint holds the final state: final.h5 is a second name for it (a
    // BERT-large state is 4 GB), written anew only where the file system cannot link.
    const std::string final_path = out_dir + "/final.h5", last_path = out_dir + "/epoch_" + std::to_string(epochs_run) + ".h5";
    std::error_code ec;
    std::filesystem::remove(final_path, ec);
    std::filesystem::create_hard_link(last_path, final_path, ec);
    if (ec && failed(bert_checkpoint(s, final_path.c_str()), "bert_checkpoint")) status = 1;
    else std::printf("saved %s\n", final_path.c_str());
  }
  bert_session_destroy(s);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (bert_tools::asks_for_help(argc, argv)) return usage(stdout);
  if (argc != 2) return usage();
  try {
    return bert_tools::finish(run(argv[1]));
  } catch (const std::exception& e) {  // bert::Error included
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
