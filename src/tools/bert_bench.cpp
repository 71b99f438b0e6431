// bert-bench: times N optimizer steps on synthetic data for a model/batch/sequence length and
// prints one JSON line (sequences/s, tokens/s, step time, peak RSS, threads, and the engine's
// memory accounting: parameters, gradients, optimizer, activation arena, peak backend bytes),
// and the model FLOPs achieved (6 x parameters-touched per token, plus attention), as a
// fraction of --peak-tflops when given (model-FLOPs utilisation). --steps 0 prints the memory
// accounting only; --recompute gelu|attention|all shows what recomputation saves. --data DIR
// times steps on DLE/MLPerf shards instead (real sequence lengths; --unpad 1 drops the padding,
// and tokens/s then counts real tokens; --length-bins 1 reads `bert-prep bins` output, each batch
// from one bin). --accumulation N makes a step N micro-batches of --batch (gradient accumulation,
// as DLE's phase 2 runs: the optimizer step is shared by N micro-batches). --cost-model h100|a100
// runs the step on the cost model instead and prints its prediction for that GPU
// (bench_cost_model.h).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_cost_model.h"
#include "bert.h"
#include "command_line.h"
#include "tool_common.h"

namespace {

// Model FLOPs of one training step per sequence (forward + backward = 3 x forward; a GEMM of
// m x k by k x n is 2mkn): the encoder's four dense layers per token, attention's QK^T and PV
// over the full padded length, and the MLM head on the masked positions. Recomputation is not
// counted (model FLOPs, not hardware FLOPs).
double training_flops_per_sequence(const nlohmann::json& m, int seq, int predictions) {
  const double H = m["hidden_size"].get<double>(), I = m["intermediate_size"].get<double>();
  const double L = m["num_hidden_layers"].get<double>(), V = m["vocab_size"].get<double>();
  const double dense_per_token = 2.0 * (4.0 * H * H + 2.0 * H * I);
  const double attention_per_token = 2.0 * 2.0 * seq * H;
  const double forward = L * seq * (dense_per_token + attention_per_token) + predictions * 2.0 * (H * H + H * V);
  return 3.0 * forward;
}

constexpr const char* kUsage =
    "usage: bert-bench [--model PRESET] [--batch B] [--accumulation N] [--seq S] [--steps N] [--warmup W]\n"
    "                  [--threads T] [--predictions P] [--device cpu|cuda] [--optimizer lamb|adamw|sgd]\n"
    "                  [--precision fp32|tf32|bf16|fp16] [--recompute none|gelu|attention|all]\n"
    "                  [--fused-attention 0|1] [--peak-tflops T] [--data SHARD_DIR] [--unpad 0|1]\n"
    "                  [--length-bins 0|1] (--data holds bin_0, bin_1, ...: each batch from one bin)\n"
    "                  [--graphed 0|1] (cuda: each micro-batch replayed as a CUDA graph)\n"
    "       bert-bench --cost-model h100|a100 [--model ...] [--batch B] [--accumulation N] [--seq S]\n"
    "                  [--precision P]\n"
    "                  [--peak-tflops T] [--bandwidth TB/s] [--graphed 0|1] [--world N]\n"
    "                  [--link-gbs GB/s] [--bucket-mb MB] [--wire-precision fp32|bf16|fp16]\n"
    "                  [--shard-optimizer 0|1] [--activations-16bit 0|1]\n"
    "                  [--fused-attention 0|1] [--data SHARD_DIR] [--unpad 0|1]\n"
    "                  [--length-bins 0|1] (a prediction: no GPU needed; --activations-16bit 0\n"
    "                  models fp32 activations; --length-bins 1: each bin's step and their mix;\n"
    "                  --world N: the gradient all-reduce in buckets of dist.bucket_mb (the\n"
    "                  session's default unless --bucket-mb), overlapping the backward pass)\n";

}  // namespace

int main(int argc, char** argv) {
  if (bert_tools::asks_for_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const bert_tools::CommandLine args(
      "bert-bench", kUsage, argc, argv, 1,
      {.with_value = {"--model", "--batch", "--accumulation", "--seq", "--steps", "--warmup", "--threads",
                      "--predictions", "--device", "--optimizer", "--precision", "--recompute", "--fused-attention",
                      "--peak-tflops", "--data", "--unpad", "--length-bins", "--cost-model", "--bandwidth", "--graphed",
                      "--world", "--link-gbs", "--bucket-mb", "--wire-precision", "--shard-optimizer",
                      "--activations-16bit"}});
  const std::string model = args.text("--model", "bert-base"), device = args.text("--device", "cpu");
  const std::string optimizer = args.text("--optimizer", "lamb"), data_dir = args.text("--data");
  const std::string recompute = args.choice("--recompute", "none", {"none", "gelu", "attention", "all"});
  const std::string cost_model = args.text("--cost-model");
  std::string precision = args.text("--precision");
  const int batch = static_cast<int>(args.integer("--batch", 8, 1, 1 << 16));
  const int accumulation = static_cast<int>(args.integer("--accumulation", 1, 1, 1 << 16));
  const int seq = static_cast<int>(args.integer("--seq", 128, 1, 1 << 16));
  const int steps = static_cast<int>(args.integer("--steps", 5, 0, 1 << 30));
  const int warmup = static_cast<int>(args.integer("--warmup", 1, 0, 1 << 30));
  const int threads = static_cast<int>(args.integer("--threads", 0, 0, 4096));
  int predictions = static_cast<int>(args.integer("--predictions", -1, 0, 1 << 16));
  const int world = static_cast<int>(args.integer("--world", 1, 1, 1 << 20));
  const bool fused_attention = args.boolean("--fused-attention", false), unpad = args.boolean("--unpad", false);
  const bool graphed = args.boolean("--graphed", false), shard_optimizer = args.boolean("--shard-optimizer", false);
  const bool activations_16bit = args.boolean("--activations-16bit", true);
  const bool length_bins = args.boolean("--length-bins", false);
  const double peak_tflops = args.number("--peak-tflops", 0, 0, 1e9), bandwidth = args.number("--bandwidth", 0, 0, 1e9);
  const double link_gbs = args.number("--link-gbs", 0, 0, 1e9);
  nlohmann::json dist = nlohmann::json::object();  // dist keys given on the command line
  if (args.has("--bucket-mb")) dist["bucket_mb"] = args.number("--bucket-mb", 0, 0, 1e9);
  if (args.has("--wire-precision")) dist["wire_precision"] = args.text("--wire-precision");
  if (length_bins && data_dir.empty()) {
    std::fprintf(stderr, "error: --length-bins 1 needs --data DIR (the output of bert-prep bins)\n");
    return 2;
  }
  if (predictions < 0) predictions = seq >= 512 ? 80 : seq * 20 / 128;
  const int sequences = batch * accumulation;  // per step
  if (precision.empty()) precision = device == "cpu" && cost_model.empty() ? "fp32" : "bf16";
  nlohmann::json config = {
      {"model", model},
      {"device", device},
      {"train",
       {{"micro_batch", batch},
        {"accumulation_steps", accumulation},
        {"steps", steps + warmup},
        {"threads", threads},
        {"optimizer", optimizer},
        {"precision", precision},
        {"fused_attention", fused_attention},
        {"recompute_gelu", recompute == "gelu" || recompute == "all"},
        {"recompute_attention", recompute == "attention" || recompute == "all"}}},
      {"data", {{"max_seq_length", seq}, {"max_predictions_per_seq", predictions}, {"unpad", unpad}}}};
  if (!dist.empty()) config["dist"] = dist;
  if (graphed && cost_model.empty()) config["train"]["cuda_graphs"] = true;
  if (!data_dir.empty()) {
    config["data"]["source"] = "hdf5";
    config["data"]["train_dir"] = data_dir;
    config["data"]["length_bins"] = length_bins;
  }
  if (!cost_model.empty()) {
    bert_tools::CostModelRequest request;
    request.device = cost_model;
    request.config = config;
    request.precision = bert::parse_precision(precision);
    request.batch = sequences;
    request.peak_tflops = peak_tflops;
    request.bandwidth_tbs = bandwidth;
    request.graphed = graphed;
    request.world = world;
    request.link_gbs = link_gbs;
    request.shard_optimizer = shard_optimizer;
    request.activations_16bit = activations_16bit;
    request.fused_attention = fused_attention;
    request.model_flops = [&](const nlohmann::json& m) {
      return training_flops_per_sequence(m, seq, predictions) * sequences;
    };
    return bert_tools::run_cost_model(request);
  }
  bert_session* session = nullptr;
  if (bert_tools::failed(bert_session_create(config.dump().c_str(), nullptr, &session), "bert_session_create")) return 1;
  const nlohmann::json resolved = nlohmann::json::parse(bert_session_config(session));
  const int used_threads = resolved["train"]["threads"].get<int>();
  const double flops_per_sequence = training_flops_per_sequence(resolved["model"], seq, predictions);
  bert_memory_info memory;
  bert_memory_info_init(&memory);
  if (bert_tools::failed(bert_session_memory(session, &memory), "bert_session_memory")) return 1;
  auto mib = [](uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; };
  nlohmann::json memory_json = {{"parameters_mib", mib(memory.parameter_bytes)},
                                {"gradients_mib", mib(memory.gradient_bytes)},
                                {"optimizer_mib", mib(memory.optimizer_bytes)},
                                {"activations_mib", mib(memory.activation_bytes)},
                                {"peak_backend_mib", mib(memory.peak_device_bytes)}};
  if (steps == 0) {  // memory only: the engine's own accounting for this shape
    std::printf("%s\n", nlohmann::json({{"model", model}, {"batch", batch}, {"seq", seq}, {"recompute", recompute},
                                        {"memory", memory_json}}).dump().c_str());
    bert_session_destroy(session);
    return 0;
  }

  bert_step_result r;
  bert_step_result_init(&r);
  for (int i = 0; i < warmup; ++i) {
    if (bert_tools::failed(bert_step(session, nullptr, &r), "bert_step")) return 1;
  }
  double real_tokens = 0;  // non-padding tokens of the timed steps
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    if (bert_tools::failed(bert_step(session, nullptr, &r), "bert_step")) return 1;
    real_tokens += r.tokens_per_second * r.step_seconds;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bert_session_destroy(session);

  const double tflops = flops_per_sequence * sequences * steps / seconds / 1e12;
  nlohmann::json out = {{"model", model},
                        {"device", device},
                        {"precision", precision},
                        {"recompute", recompute},
                        {"fused_attention", fused_attention},
                        {"cuda_graphs", graphed},
                        {"data", data_dir.empty() ? "synthetic" : length_bins ? "length bins" : "shards"},
                        {"unpad", unpad},
                        {"batch", batch},
                        {"accumulation", accumulation},
                        {"seq", seq},
                        {"steps", steps},
                        {"threads", used_threads},
                        {"step_seconds", seconds / steps},
                        {"sequences_per_second", sequences * steps / seconds},
                        {"tokens_per_second", static_cast<double>(sequences) * seq * steps / seconds},
                        {"real_tokens_per_second", real_tokens / seconds},
                        {"model_tflops", tflops},
                        {"peak_rss_mib", bert_tools::peak_rss_bytes() / 1048576.0},
                        {"memory", memory_json},
                        {"final_loss", r.loss}};
  if (peak_tflops > 0) out["mfu"] = tflops / peak_tflops;
  std::printf("%s\n", out.dump().c_str());
  return bert_tools::finish(0);
}
