// Op profile of one training step: runs bert-bench's synthetic step (same config keys) with the
// backend observed by an OpProfiler and prints, per operation and per op family, the calls and
// milliseconds per step and their share of the summed op time, then one JSON line with the same.
// With --infer 1 a "step" is one inference call of a sequence classifier (mode "inference", as
// bench_cpu.py's inference rows) on a batch of random token ids.
// Each op is timed between two synchronisations (a profile, not a throughput figure: bert-bench
// measures that). A benchmark: it prints what it measured, it asserts nothing.
//   bench_op_profile [--model PRESET] [--batch B] [--seq S] [--steps N] [--warmup W] [--device cpu|cuda]
//                    [--precision P] [--fused-attention 0|1] [--threads T] [--infer 0|1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "dist/communicator.h"
#include "perf/op_profiler.h"
#include "session/session.h"

namespace {

// The family an operation belongs to, for the summary.
std::string family_of(const std::string& op) {
  static const std::vector<std::pair<std::string, std::string>> prefixes = {
      {"linear_", "dense layers (GEMM)"},   {"attention_", "attention"},
      {"residual_layernorm_", "residual block (dropout + residual + layernorm)"},
      {"layernorm_", "layernorm"},          {"dropout_", "dropout + residual"},
      {"activation_", "activation"},        {"embedding_", "embeddings"},
      {"softmax_xent", "MLM/NSP loss"},     {"gather_rows", "gather/scatter"},
      {"scatter_add_rows", "gather/scatter"}, {"segment_sumsq", "optimizer"},
      {"adam_direction", "optimizer"},      {"apply_update", "optimizer"},
      {"scale", "optimizer"}};
  for (const auto& [prefix, family] : prefixes) {
    if (op.rfind(prefix, 0) == 0) return family;
  }
  return "memory (copies, fills, transfers)";
}

struct Row {
  std::string name;
  double calls = 0, ms = 0;
};

std::vector<Row> sorted_rows(const std::map<std::string, Row>& rows) {
  std::vector<Row> out;
  for (const auto& [name, row] : rows) out.push_back(row);
  std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  return out;
}

void print_table(const char* title, const std::vector<Row>& rows, double total_ms) {
  std::printf("\n%-36s %12s %12s %8s\n", title, "calls/step", "ms/step", "share");
  for (const Row& r : rows) std::printf("%-36s %12.1f %12.3f %7.1f%%\n", r.name.c_str(), r.calls, r.ms, 100.0 * r.ms / total_ms);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "bert-base", device = "cpu", precision;
  int batch = 8, seq = 128, steps = 3, warmup = 1, threads = 0;
  bool fused_attention = false, infer = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model") model = v;
    else if (a == "--batch") batch = std::atoi(v.c_str());
    else if (a == "--seq") seq = std::atoi(v.c_str());
    else if (a == "--steps") steps = std::atoi(v.c_str());
    else if (a == "--warmup") warmup = std::atoi(v.c_str());
    else if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--device") device = v;
    else if (a == "--precision") precision = v;
    else if (a == "--fused-attention") fused_attention = v == "1" || v == "true";
    else if (a == "--infer") infer = v == "1" || v == "true";
    else {
      std::fprintf(stderr, "bench_op_profile: unknown option '%s' (see the comment at the top of bench_op_profile.cpp)\n",
                   a.c_str());
      return 2;
    }
  }
  if ((argc - 1) % 2 != 0 || steps < 1) {
    std::fprintf(stderr, "bench_op_profile: every option takes a value, and --steps must be at least 1\n");
    return 2;
  }
  if (precision.empty()) precision = device == "cpu" ? "fp32" : "bf16";
  const int predictions = seq >= 512 ? 80 : seq * 20 / 128;
  nlohmann::json config = {
      {"model", model},
      {"device", device},
      {"train",
       {{"micro_batch", batch},
        {"steps", steps + warmup},
        {"threads", threads},
        {"precision", precision},
        {"fused_attention", fused_attention}}},
      {"data", {{"max_seq_length", seq}, {"max_predictions_per_seq", infer ? 0 : predictions}, {"unpad", false}}}};
  if (infer) {
    config["mode"] = "inference";
    config["task"] = {{"type", "sequence_classification"}, {"num_labels", 2}};
  }
  // The inference batch: random token ids, every position real.
  const size_t tokens = static_cast<size_t>(batch) * seq;
  std::vector<int32_t> ids(tokens), segments(tokens, 0), mask(tokens, 1);
  for (size_t i = 0; i < tokens; ++i) ids[i] = static_cast<int32_t>(5 + (i * 7919) % 30000);
  bert::BatchView view;
  view.batch_size = batch;
  view.seq_length = seq;
  view.input_ids = ids.data();
  view.segment_ids = segments.data();
  view.input_mask = mask.data();
  std::vector<float> logits(static_cast<size_t>(batch) * 2);
  try {
    bert::OpProfiler profile;  // declared first: outlives the session it observes
    bert::Session session(bert::parse_session_config(config.dump()), bert::make_local_communicator());
    auto run_step = [&] {
      if (infer) session.infer(view, bert::ModelOutput::logits, logits.data(), logits.size());
      else session.step(nullptr);
    };
    session.ops().add_observer(&profile);
    for (int i = 0; i < warmup; ++i) run_step();
    profile.reset();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) run_step();
    session.ops().remove_observer(&profile);
    session.ops().synchronize();
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;

    std::map<std::string, Row> ops, families;
    double total_ms = 0;
    for (const auto& [name, t] : profile.timings()) {
      const double calls = static_cast<double>(t.calls) / steps, ms = 1e3 * t.seconds / steps;
      ops[name] = {name, calls, ms};
      Row& f = families[family_of(name)];
      f.name = family_of(name);
      f.calls += calls;
      f.ms += ms;
      total_ms += ms;
    }
    std::printf("%s %s on %s (%s%s), micro-batch %d, sequence %d: %.3f ms per %s profiled, %.3f ms in ops\n",
                model.c_str(), infer ? "inference" : "training", device.c_str(), precision.c_str(),
                fused_attention ? ", fused attention" : "", batch, seq, wall_ms, infer ? "call" : "step", total_ms);
    const std::vector<Row> family_rows = sorted_rows(families), op_rows = sorted_rows(ops);
    print_table("op family", family_rows, total_ms);
    print_table("operation", op_rows, total_ms);

    nlohmann::json out = {{"model", model}, {"mode", infer ? "inference" : "training"}, {"device", device},
                          {"precision", precision},
                          {"fused_attention", fused_attention}, {"batch", batch}, {"seq", seq},
                          {"profiled_step_ms", wall_ms}, {"op_ms", total_ms}};
    for (const Row& r : family_rows) out["families"].push_back({{"family", r.name}, {"calls", r.calls}, {"ms", r.ms}});
    for (const Row& r : op_rows) out["ops"].push_back({{"op", r.name}, {"calls", r.calls}, {"ms", r.ms}});
    std::printf("\n%s\n", out.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_op_profile: %s\n", e.what());
    return 1;
  }
  return 0;
}
