// bert-finetune CONFIG.json: fine-tunes a pretrained BERT on a GLUE task through the C ABI.
// The config is the session schema (README.md) plus a "finetune" section:
//   {"finetune": {"task": "sst-2", "data_dir": "glue/SST-2", "vocab": "vocab.txt", "epochs": 3,
//                 "output_dir": "out", "lower_case": true, "eval_batch": 64},
//    "train": {"init_checkpoint": "pretrained.h5 or an HF folder", "micro_batch": 32, "lr": 5e-5, ...},
//    "data": {"max_seq_length": 128}}
// "model" defaults to the init checkpoint's; the task head, the step count (epochs x batches),
// AdamW with linear warmup and decay (DLE's fine-tuning defaults) are filled in. Prints
// progress, evaluates on the dev file after each epoch (the task's metric), and checkpoints
// output_dir/epoch_<n>.h5 and output_dir/final.h5.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "core/error.h"
#include "finetune_common.h"
#include "tool_common.h"

namespace {

using bert_tools::failed;
using nlohmann::json;

int usage() {
  std::fprintf(stderr, "usage: bert-finetune CONFIG.json\n"
                       "  the session config plus {\"finetune\": {\"task\": NAME, \"data_dir\": DIR, \"vocab\": FILE,\n"
                       "  \"epochs\": N, \"output_dir\": DIR, \"lower_case\": BOOL, \"eval_batch\": N}} (README.md)\n");
  return 2;
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
                                                   "eval_batch"};
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      bert::fail(bert::Code::config, "unknown config key 'finetune.", key, "'");
    }
  }
  const bert::GlueTask task = bert::glue_task(get<std::string>(ft, "task", ""));
  const std::string data_dir = get<std::string>(ft, "data_dir", "");
  const std::string vocab_path = get<std::string>(ft, "vocab", "");
  const std::string out_dir = get<std::string>(ft, "output_dir", "finetune_out");
  const int epochs = get<int>(ft, "epochs", 3);
  BERT_CHECK(!data_dir.empty() && !vocab_path.empty(), bert::Code::config,
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
  const int max_seq = cfg.value("data", json::object()).value("max_seq_length", 128);
  const bert::Vocab vocab = bert::Vocab::load(vocab_path);
  bert::TokenizerOptions topt;
  topt.lower_case = get<bool>(ft, "lower_case", !vocab.has_upper_case());
  const bert::Tokenizer tokenizer(vocab, topt);
  bert_tools::GlueSet train_set = bert_tools::load_glue_set(task, data_dir + "/train.tsv", tokenizer, max_seq);
  bert_tools::GlueSet dev_set = bert_tools::load_glue_set(task, data_dir + "/" + task.dev_file, tokenizer, max_seq);

  const int micro = train.value("micro_batch", 32);
  const int accumulation = train.value("accumulation_steps", 1);
  const int per_step = micro * accumulation;
  const int64_t steps_per_epoch = (train_set.features.count + per_step - 1) / per_step;
  cfg["task"] = {{"type", "sequence_classification"}, {"num_labels", task.num_labels()}};
  if (!task.regression()) cfg["task"]["id2label"] = task.labels;
  train["micro_batch"] = micro;
  train["steps"] = steps_per_epoch * epochs;
  if (!train.contains("optimizer")) train["optimizer"] = "adamw";
  if (!train.contains("lr")) train["lr"] = 5e-5;
  if (!train.contains("decay_degree")) train["decay_degree"] = 1.0;  // linear decay
  if (!train.contains("warmup_proportion") && !train.contains("warmup_steps")) train["warmup_proportion"] = 0.1;
  if (!cfg.contains("data")) cfg["data"] = json::object();
  cfg["data"]["max_seq_length"] = max_seq;
  if (!cfg["data"].contains("max_predictions_per_seq")) cfg["data"]["max_predictions_per_seq"] = 0;

  bert_session* s = nullptr;
  if (failed(bert_session_create(cfg.dump().c_str(), nullptr, &s), "bert_session_create")) return 1;
  std::printf("fine-tuning %s: %d train / %d dev examples (%s), %lld steps of %d sequences (%d epochs)\n",
              task.name.c_str(), train_set.features.count, dev_set.features.count, task.dev_file.c_str(),
              static_cast<long long>(steps_per_epoch * epochs), per_step, epochs);
  std::vector<int32_t> order(train_set.features.count);
  bert_tools::BatchStorage storage;
  const int log_every = train.value("log_every", 10);
  const int eval_batch = get<int>(ft, "eval_batch", 64);
  int64_t step = 0;
  int status = 0;
  for (int epoch = 1; epoch <= epochs && status == 0; ++epoch) {
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::mt19937_64 rng(train.value("seed", 12345) + epoch);
    std::shuffle(order.begin(), order.end(), rng);
    const auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t seen = 0, loss_steps = 0;
    for (size_t begin = 0; begin < order.size(); begin += per_step) {
      std::vector<int32_t> rows(order.begin() + begin, order.begin() + std::min(order.size(), begin + per_step));
      const bert_batch b = bert_tools::make_batch(train_set.features, rows, task.regression(), true, storage);
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
      if (step % log_every == 0 || begin + per_step >= order.size()) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("epoch %d/%d  step %lld/%lld  loss %.4f  lr %.3e  %.1f seq/s\n", epoch, epochs,
                    static_cast<long long>(step), static_cast<long long>(steps_per_epoch * epochs),
                    loss_sum / loss_steps, r.learning_rate, seen / secs);
        std::fflush(stdout);
        loss_sum = 0;
        loss_steps = 0;
      }
    }
    if (status) break;
    std::vector<float> logits;
    double secs = 0;
    if (!bert_tools::infer_logits(s, dev_set.features, task.num_labels(), eval_batch, logits, &secs)) {
      status = 1;
      break;
    }
    std::printf("epoch %d eval %s (%d examples, %.1f seq/s): %s\n", epoch, task.dev_file.c_str(), dev_set.features.count,
                dev_set.features.count / secs, bert_tools::format_metrics(bert_tools::glue_metrics(task, dev_set, logits)).c_str());
    const std::string path = out_dir + "/epoch_" + std::to_string(epoch) + ".h5";
    if (failed(bert_checkpoint(s, path.c_str()), "bert_checkpoint")) status = 1;
    std::fflush(stdout);
  }
  if (status == 0) {
    const std::string final_path = out_dir + "/final.h5";
    if (failed(bert_checkpoint(s, final_path.c_str()), "bert_checkpoint")) status = 1;
    else std::printf("saved %s\n", final_path.c_str());
  }
  bert_session_destroy(s);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return usage();
  try {
    return run(argv[1]);
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
