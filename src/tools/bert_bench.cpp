// bert-bench: times N optimizer steps on synthetic data for a model/batch/sequence length and
// prints one JSON line (sequences/s, tokens/s, step time, peak RSS, threads, and the engine's
// memory accounting: parameters, gradients, optimizer, activation arena, peak backend bytes),
// and the model FLOPs achieved (6 x parameters-touched per token, plus attention), as a
// fraction of --peak-tflops when given (model-FLOPs utilisation). --steps 0 prints the memory
// accounting only; --recompute gelu|attention|all shows what recomputation saves. --data DIR
// times steps on DLE/MLPerf shards instead (real sequence lengths; --unpad 1 drops the padding,
// and tokens/s then counts real tokens; --length-bins 1 reads `bert-prep bins` output, each batch
// from one bin). --accumulation N makes a step N micro-batches of --batch (gradient accumulation,
// as DLE's phase 2 runs: the optimizer step is shared by N micro-batches). --cost-model h100|a100|h200
// runs the step on the cost model instead and prints its prediction for that GPU (h200: rates
// measured on one; bench_cost_model.h).
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
    "       bert-bench --cost-model h100|a100|h200 [--model ...] [--batch B] [--accumulation N] [--seq S]\n"
    "                  [--precision P]\n"
    "                  [--peak-tflops T] [--bandwidth TB/s] [--graphed 0|1] [--world N]\n"
    "                  [--link-gbs GB/s] [--bucket-mb MB] [--wire-precision fp32|bf16|fp16]\n"
    "                  [--shard-optimizer 0|1] [--activations-16bit 0|1]\n"
    "                  [--fused-attention 0|1] [--data SHARD_DIR] [--unpad 0|1]\n"
    "                  [--length-bins 0|1] (a prediction: no GPU needed; --activations-16bit 0\n"
    "                  models fp32 activations; --length-bins 1: each bin's step and their mix;\n"
    "                  --world N: the gradient all-reduce in buckets of dist.bucket_mb (the\n"
    "                  session's default unless --bucket-mb), overlapping the backward pass)\n";

// The command line.
struct BenchOptions {
  std::string model, device, optimizer, data_dir, recompute, cost_model, precision;
  int batch = 8, accumulation = 1, seq = 128, steps = 5, warmup = 1, threads = 0, predictions = 0, world = 1;
  bool fused_attention = false, unpad = false, graphed = false, shard_optimizer = false, activations_16bit = true;
  bool length_bins = false;
  double peak_tflops = 0, bandwidth = 0, link_gbs = 0;
  nlohmann::json dist = nlohmann::json::object();  // dist keys given on the command line

  int sequences() const { return batch * accumulation; }  // per step
};

BenchOptions parse_options(const bert_tools::CommandLine& args) {
  BenchOptions o;
  o.model = args.text("--model", "bert-base");
  o.device = args.text("--device", "cpu");
  o.optimizer = args.text("--optimizer", "lamb");
  o.data_dir = args.text("--data");
  o.recompute = args.choice("--recompute", "none", {"none", "gelu", "attention", "all"});
  o.cost_model = args.text("--cost-model");
  o.batch = static_cast<int>(args.integer("--batch", 8, 1, 1 << 16));
  o.accumulation = static_cast<int>(args.integer("--accumulation", 1, 1, 1 << 16));
  o.seq = static_cast<int>(args.integer("--seq", 128, 1, 1 << 16));
  o.steps = static_cast<int>(args.integer("--steps", 5, 0, 1 << 30));
  o.warmup = static_cast<int>(args.integer("--warmup", 1, 0, 1 << 30));
  o.threads = static_cast<int>(args.integer("--threads", 0, 0, 4096));
  o.predictions = static_cast<int>(args.integer("--predictions", -1, 0, 1 << 16));
  if (o.predictions < 0) o.predictions = o.seq >= 512 ? 80 : o.seq * 20 / 128;
  o.world = static_cast<int>(args.integer("--world", 1, 1, 1 << 20));
  o.fused_attention = args.boolean("--fused-attention", false);
  o.unpad = args.boolean("--unpad", false);
  o.graphed = args.boolean("--graphed", false);
  o.shard_optimizer = args.boolean("--shard-optimizer", false);
  o.activations_16bit = args.boolean("--activations-16bit", true);
  o.length_bins = args.boolean("--length-bins", false);
  o.peak_tflops = args.number("--peak-tflops", 0, 0, 1e9);
  o.bandwidth = args.number("--bandwidth", 0, 0, 1e9);
  o.link_gbs = args.number("--link-gbs", 0, 0, 1e9);
  if (args.has("--bucket-mb")) o.dist["bucket_mb"] = args.number("--bucket-mb", 0, 0, 1e9);
  if (args.has("--wire-precision")) o.dist["wire_precision"] = args.text("--wire-precision");
  o.precision = args.text("--precision");
  if (o.precision.empty()) o.precision = o.device == "cpu" && o.cost_model.empty() ? "fp32" : "bf16";
  return o;
}

// The session's config for the benchmark's steps (synthetic batches unless --data).
nlohmann::json session_config(const BenchOptions& o) {
  nlohmann::json config = {
      {"model", o.model},
      {"device", o.device},
      {"train",
       {{"micro_batch", o.batch},
        {"accumulation_steps", o.accumulation},
        {"steps", o.steps + o.warmup},
        {"threads", o.threads},
        {"optimizer", o.optimizer},
        {"precision", o.precision},
        {"fused_attention", o.fused_attention},
        {"recompute_gelu", o.recompute == "gelu" || o.recompute == "all"},
        {"recompute_attention", o.recompute == "attention" || o.recompute == "all"}}},
      {"data", {{"max_seq_length", o.seq}, {"max_predictions_per_seq", o.predictions}, {"unpad", o.unpad}}}};
  if (!o.dist.empty()) config["dist"] = o.dist;
  if (o.graphed && o.cost_model.empty()) config["train"]["cuda_graphs"] = true;
  if (!o.data_dir.empty()) {
    config["data"]["source"] = "hdf5";
    config["data"]["train_dir"] = o.data_dir;
    config["data"]["length_bins"] = o.length_bins;
  }
  return config;
}

// --cost-model: the step run on the cost model, its prediction printed.
int predict(const BenchOptions& o, const nlohmann::json& config) {
  bert_tools::CostModelRequest request;
  request.device = o.cost_model;
  request.config = config;
  request.precision = bert::parse_precision(o.precision);
  request.batch = o.sequences();
  request.peak_tflops = o.peak_tflops;
  request.bandwidth_tbs = o.bandwidth;
  request.graphed = o.graphed;
  request.world = o.world;
  request.link_gbs = o.link_gbs;
  request.shard_optimizer = o.shard_optimizer;
  request.activations_16bit = o.activations_16bit;
  request.fused_attention = o.fused_attention;
  request.model_flops = [&](const nlohmann::json& m) {
    return training_flops_per_sequence(m, o.seq, o.predictions) * o.sequences();
  };
  return bert_tools::run_cost_model(request);
}

// The engine's memory accounting in MiB.
nlohmann::json memory_mib(const bert_memory_info& memory) {
  auto mib = [](uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; };
  return {{"parameters_mib", mib(memory.parameter_bytes)},
          {"gradients_mib", mib(memory.gradient_bytes)},
          {"optimizer_mib", mib(memory.optimizer_bytes)},
          {"activations_mib", mib(memory.activation_bytes)},
          {"peak_backend_mib", mib(memory.peak_device_bytes)}};
}

// Times --steps steps after --warmup and prints the JSON line (the memory accounting alone for
// --steps 0).
int measure(const BenchOptions& o, const nlohmann::json& config) {
  bert_session* session = nullptr;
  if (bert_tools::failed(bert_session_create(config.dump().c_str(), nullptr, &session), "bert_session_create")) return 1;
  const nlohmann::json resolved = nlohmann::json::parse(bert_session_config(session));
  const int used_threads = resolved["train"]["threads"].get<int>();
  const double flops_per_sequence = training_flops_per_sequence(resolved["model"], o.seq, o.predictions);
  bert_memory_info memory;
  bert_memory_info_init(&memory);
  if (bert_tools::failed(bert_session_memory(session, &memory), "bert_session_memory")) return 1;
  if (o.steps == 0) {  // memory only: the engine's own accounting for this shape
    std::printf("%s\n", nlohmann::json({{"model", o.model}, {"batch", o.batch}, {"seq", o.seq},
                                        {"recompute", o.recompute}, {"memory", memory_mib(memory)}}).dump().c_str());
    bert_session_destroy(session);
    return 0;
  }

  bert_step_result r;
  bert_step_result_init(&r);
  for (int i = 0; i < o.warmup; ++i) {
    if (bert_tools::failed(bert_step(session, nullptr, &r), "bert_step")) return 1;
  }
  double real_tokens = 0;  // non-padding tokens of the timed steps
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) {
    if (bert_tools::failed(bert_step(session, nullptr, &r), "bert_step")) return 1;
    real_tokens += r.tokens_per_second * r.step_seconds;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bert_session_destroy(session);

  const double sequences = o.sequences();
  const double tflops = flops_per_sequence * sequences * o.steps / seconds / 1e12;
  nlohmann::json out = {{"model", o.model},
                        {"device", o.device},
                        {"precision", o.precision},
                        {"recompute", o.recompute},
                        {"fused_attention", o.fused_attention},
                        {"cuda_graphs", o.graphed},
                        {"data", o.data_dir.empty() ? "synthetic" : o.length_bins ? "length bins" : "shards"},
                        {"unpad", o.unpad},
                        {"batch", o.batch},
                        {"accumulation", o.accumulation},
                        {"seq", o.seq},
                        {"steps", o.steps},
                        {"threads", used_threads},
                        {"step_seconds", seconds / o.steps},
                        {"sequences_per_second", sequences * o.steps / seconds},
                        {"tokens_per_second", sequences * o.seq * o.steps / seconds},
                        {"real_tokens_per_second", real_tokens / seconds},
                        {"model_tflops", tflops},
                        {"peak_rss_mib", bert_tools::peak_rss_bytes() / 1048576.0},
                        {"memory", memory_mib(memory)},
                        {"final_loss", r.loss}};
  if (o.peak_tflops > 0) out["mfu"] = tflops / o.peak_tflops;
  std::printf("%s\n", out.dump().c_str());
  return bert_tools::finish(0);
}

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
  const BenchOptions o = parse_options(args);
  if (o.length_bins && o.data_dir.empty()) {
    std::fprintf(stderr, "error: --length-bins 1 needs --data DIR (the output of bert-prep bins)\n");
    return 2;
  }
  const nlohmann::json config = session_config(o);
  return o.cost_model.empty() ? measure(o, config) : predict(o, config);
}
