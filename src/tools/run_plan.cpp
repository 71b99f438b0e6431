// bert-train --plan (see run_plan.h). Each phase's recipe is resolved for the world size by a
// session over the cost model (the same code that resolves a real run: the batch split, its
// refusals, the sharded optimizer's share, the memory accounting), with synthetic data standing in
// for the recipe's files and without its init checkpoint. A CUDA recipe's step is predicted on an
// H100 at the rates measured on the lent machine (bf16 GEMM 769 TFLOP/s, device copy 3.0 TB/s),
// not the datasheet's, from one- and two-micro-batch steps: the micro-batches before the last of
// a step are alike, so a step of A micro-batches takes t1 + (A - 1)(t2 - t1).
#include "run_plan.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "bench_cost_model.h"
#include "session/session_config.h"
#include "tool_common.h"

namespace bert_tools {
namespace {

constexpr double kMeasuredH100Tflops = 769;       // KINDS.md: bf16 8192^3 GEMM, 769-798 TFLOP/s
constexpr double kMeasuredH100CopyTbs = 3.0;      // KINDS.md: device-to-device copy

// The recipe as the plan's session runs it: synthetic data in place of its files (they need not
// exist where the run is planned), no init checkpoint, checkpoint directory or logs.
nlohmann::json planning_config(nlohmann::json config) {
  nlohmann::json& data = config["data"];
  data["source"] = "synthetic";
  for (const char* key : {"train_dir", "eval_dir"}) data.erase(key);
  data["length_bins"] = false;
  data["balance_ranks"] = false;
  config["train"].erase("init_checkpoint");
  config["train"].erase("init_optimizer_state");
  config["checkpoint"].erase("dir");
  config.erase("log");
  return config;
}

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1u << 30); }

// The optimizer steps after which bert-train evaluates (it also evaluates at the end).
std::vector<int64_t> evaluation_steps(const nlohmann::json& train, int64_t global_batch) {
  std::vector<int64_t> steps;
  const int64_t total = train["steps"], every = train["eval_every"], every_samples = train["eval_every_samples"];
  for (int64_t step = 1; step <= total; ++step) {
    if (evaluation_due(step, every, every_samples, global_batch)) steps.push_back(step);
  }
  return steps;
}

std::string step_list(const std::vector<int64_t>& steps) {
  std::string text;
  for (size_t i = 0; i < steps.size() && i < 5; ++i) text += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > 5) text += ", ... " + std::to_string(steps.back());
  return text.empty() ? "none" : text;
}

// The predicted step of `config` (its accumulation resolved) on an H100 with `world` ranks.
nlohmann::json cuda_forecast(const CostModelRequest& base, int accumulation, int micro_batch, int64_t steps) {
  CostModelRequest q = base;
  q.device = "h100";
  q.peak_tflops = kMeasuredH100Tflops;
  q.bandwidth_tbs = kMeasuredH100CopyTbs;
  q.config["train"].erase("global_batch");
  double seconds[2];
  for (int a = 1; a <= 2; ++a) {
    q.config["train"]["accumulation_steps"] = a;
    q.batch = micro_batch * a;
    seconds[a - 1] = forecast_step(q).seconds;
  }
  const double step = seconds[0] + (accumulation - 1) * (seconds[1] - seconds[0]);
  char device[96];
  std::snprintf(device, sizeof device, "h100 (measured rates: bf16 GEMM %.0f TFLOP/s, copy %.1f TB/s)",
                kMeasuredH100Tflops, kMeasuredH100CopyTbs);
  return {{"device", device},
          {"step_seconds", step},
          {"sequences_per_second_per_gpu", micro_batch * accumulation / step},
          {"time_to_train_seconds", step * static_cast<double>(steps)}};
}

// The plan of one phase as JSON; Error(config) when it cannot run on `world` ranks.
nlohmann::json plan_phase(const PlannedPhase& phase, int world) {
  const bert::SessionConfig given = bert::parse_session_config(phase.text);
  CostModelRequest q;
  q.config = planning_config(given.to_json());
  if (!given.train.accumulation_given) q.config["train"].erase("accumulation_steps");  // derived for `world`
  q.precision = given.on_cuda() ? given.train.precision : bert::Precision::fp32;
  q.world = world;
  q.fused_attention = given.train.fused_attention;
  q.graphed = given.train.cuda_graphs;
  q.shard_optimizer = given.dist.shard_optimizer && world > 1;
  const std::unique_ptr<bert::Session> session = planned_session(q);
  const nlohmann::json resolved = session->config().to_json();
  const nlohmann::json& train = resolved["train"];
  const int micro = train["micro_batch"], accumulation = train["accumulation_steps"];
  const int64_t steps = train["steps"], global_batch = int64_t{micro} * accumulation * world;
  const bert::LrSchedule& schedule = session->schedule();
  nlohmann::json lr = nlohmann::json::array();
  // Warmup steps as the MLPerf log counts them (num_warmup_steps); the warmup's last step has the
  // highest LR (the schedule then drops to the decay curve).
  const int64_t warmup_steps = std::llround(schedule.warmup_proportion * static_cast<double>(schedule.total_steps));
  const int64_t warmup_end = schedule.start_warmup_step + warmup_steps - 1;
  for (int64_t step : {int64_t{1}, warmup_end, warmup_end + 1, steps / 2, steps}) {
    if (step >= 1 && step <= steps && (lr.empty() || lr.back()[0] < step)) lr.push_back({step, schedule.at(step)});
  }
  const bert::SessionMemory memory = session->memory();
  const int64_t every = resolved["checkpoint"]["every"];
  nlohmann::json plan = {
      {"config", phase.path},
      {"world", world},
      {"device", given.device},
      {"precision", bert::precision_name(given.train.precision)},
      {"model", resolved["model"]},
      {"parameters", session->model().params().total_elems},
      {"micro_batch", micro},
      {"accumulation_steps", accumulation},
      {"global_batch", global_batch},
      {"steps", steps},
      {"samples", global_batch * steps},
      {"max_seq_length", resolved["data"]["max_seq_length"]},
      {"schedule_steps", schedule.total_steps},
      {"warmup_steps", warmup_steps},
      {"start_warmup_step", schedule.start_warmup_step},
      {"lr", lr},
      {"evaluation_steps", evaluation_steps(train, global_batch)},
      {"target_mlm_accuracy", train["target_mlm_accuracy"]},
      {"checkpoints", every > 0 ? steps / every : 0},
      {"memory_per_rank",
       {{"parameter_bytes", memory.parameter_bytes},
        {"gradient_bytes", memory.gradient_bytes},
        {"optimizer_bytes", memory.optimizer_bytes},
        {"activation_bytes", memory.activation_bytes},
        {"held_bytes", memory.peak_bytes}}}};
  if (given.on_cuda()) plan["prediction"] = cuda_forecast(q, accumulation, micro, steps);
  return plan;
}

void print_plan(const nlohmann::json& p) {
  const nlohmann::json& m = p["model"];
  std::printf("plan: %s on %d rank%s (device %s, %s)\n", p["config"].get<std::string>().c_str(), p["world"].get<int>(),
              p["world"] == 1 ? "" : "s", p["device"].get<std::string>().c_str(),
              p["precision"].get<std::string>().c_str());
  std::printf("  model        %d layers, hidden %d, %d heads, vocab %d: %.1f M parameters\n",
              m["num_hidden_layers"].get<int>(), m["hidden_size"].get<int>(), m["num_attention_heads"].get<int>(),
              m["vocab_size"].get<int>(), p["parameters"].get<double>() / 1e6);
  std::printf("  batch        global %" PRId64 " = micro-batch %d x accumulation %d x %d ranks, seq %d\n",
              p["global_batch"].get<int64_t>(), p["micro_batch"].get<int>(), p["accumulation_steps"].get<int>(),
              p["world"].get<int>(), p["max_seq_length"].get<int>());
  std::printf("  steps        %" PRId64 " (%" PRId64 " samples); schedule %" PRId64 " steps, warmup %" PRId64
              " steps from step %" PRId64 "\n",
              p["steps"].get<int64_t>(), p["samples"].get<int64_t>(), p["schedule_steps"].get<int64_t>(),
              p["warmup_steps"].get<int64_t>(), p["start_warmup_step"].get<int64_t>());
  std::printf("  lr          ");
  for (const auto& point : p["lr"]) std::printf(" step %" PRId64 ": %.6g;", point[0].get<int64_t>(), point[1].get<double>());
  std::printf("\n");
  const std::vector<int64_t> evals = p["evaluation_steps"];
  std::printf("  evaluation   %zu during the run (steps %s) and at the end", evals.size(), step_list(evals).c_str());
  if (p["target_mlm_accuracy"].get<double>() > 0) {
    std::printf("; stops at masked-LM accuracy %.3f", p["target_mlm_accuracy"].get<double>());
  }
  std::printf("\n  checkpoints  %" PRId64 " periodic, and the final one\n", p["checkpoints"].get<int64_t>());
  const nlohmann::json& mem = p["memory_per_rank"];
  std::printf("  memory/rank  weights %.2f GiB, gradients %.2f GiB, optimizer %.2f GiB, activations %.2f GiB: "
              "%.2f GiB held before the first step (engine accounting; a step adds its scratch)\n",
              gib(mem["parameter_bytes"]), gib(mem["gradient_bytes"]), gib(mem["optimizer_bytes"]),
              gib(mem["activation_bytes"]), gib(mem["held_bytes"]));
  if (p.contains("prediction")) {
    const nlohmann::json& f = p["prediction"];
    std::printf("  PREDICTION   (cost model, not a measurement) on %s: step %.1f ms, %.0f sequences/s per GPU, "
                "time to train %s (evaluations not counted)\n",
                f["device"].get<std::string>().c_str(), f["step_seconds"].get<double>() * 1e3,
                f["sequences_per_second_per_gpu"].get<double>(),
                format_duration(f["time_to_train_seconds"].get<double>()).c_str());
  }
}

}  // namespace

int run_plan(const std::vector<PlannedPhase>& phases, int world) {
  int code = 0;
  for (const PlannedPhase& phase : phases) {
    try {
      const nlohmann::json plan = plan_phase(phase, world);
      print_plan(plan);
      std::printf("%s\n", plan.dump().c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s cannot run on %d rank%s: %s\n", phase.path.c_str(), world, world == 1 ? "" : "s",
                   e.what());
      code = 2;
    }
  }
  return code;
}

}  // namespace bert_tools
