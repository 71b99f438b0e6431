// bert-bench's cost-model mode (see bench_cost_model.h). With world > 1 the session runs with
// ModelledRanks: its gradient buckets (dist.bucket_mb, in dist.wire_precision) become ring
// all-reduces on the communicator's stream, each moving 2(W-1)/W of the bucket's wire bytes over
// the GPU's link (with a 16-bit wire, a cast before and after), started where the backward pass
// started them and joined where the session waits: the prediction overlaps them with the rest of
// the backward pass as the session does, graphed or not. A sharded optimizer instead moves the
// same bytes as reduce-scatter + all-gather after the backward pass (no buckets), and its kernels
// run on 1/W of the parameters. With data.length_bins each bin's step is predicted and the bins'
// mix weighted by sequences.
#include "bench_cost_model.h"

#include <cstdio>
#include <memory>

#include "core/error.h"
#include "data/length_bin_source.h"
#include "dist/communicator.h"
#include "perf/cost_model_ops.h"
#include "session/session.h"

namespace bert_tools {
namespace {

// The communicator of a modelled data-parallel step: one rank as far as results go (the session's
// collectives return this rank's values), while each gradient bucket it is asked to sum is added
// to the modelled kernels as the collective work of a ring over `world` GPUs. It tells the session
// it is one of `reported_world` ranks: 1 for a modelled step (the step's work is one GPU's), the
// real world size for a planned run (the batch split and the sharded optimizer's share are the
// run's).
class ModelledRanks final : public bert::Communicator {
 public:
  ModelledRanks(int world, std::string collective, int reported_world = 1)
      : world_(world), reported_world_(reported_world), collective_(std::move(collective)) {}
  bert::CostModelOps* ops = nullptr;  // set once the session made its backend

  int rank() const override { return 0; }
  int world_size() const override { return reported_world_; }
  std::string name() const override { return "modelled ranks"; }
  void allreduce_sum(float*, int64_t n) override { add_sum(n, bert::WirePrecision::fp32); }
  void start_allreduce_sum(float*, int64_t n, bert::WirePrecision wire, void*) override { add_sum(n, wire); }
  void finish_allreduce_sums() override { add(join()); }
  void join_allreduce_sums(void*) override { add(join()); }
  void allreduce_host(float*, int64_t, bert::ReduceOp) override {}
  void broadcast(float*, int64_t) override {}
  void allreduce_sum_host(double*, int64_t) override {}
  void all_gather(float*, const std::vector<int64_t>&) override {}

 private:
  static bert::KernelCost join() {
    bert::KernelCost k;
    k.op = k.kind = "join";
    k.join = true;
    k.launches = 0;
    return k;
  }
  void add(const bert::KernelCost& k) {
    BERT_CHECK(ops != nullptr, bert::Code::internal, "ModelledRanks before the session made its backend");
    ops->add_collective_work(k);
  }
  // n floats summed over the ring; a 16-bit wire casts them (pre-divided by W) before and back after.
  void add_sum(int64_t n, bert::WirePrecision wire) {
    const double elems = static_cast<double>(n), word = wire == bert::WirePrecision::fp32 ? 4.0 : 2.0;
    bert::KernelCost sum;
    sum.op = collective_;
    sum.kind = "communication";
    sum.collective = true;
    sum.link_bytes = 2.0 * (world_ - 1) / world_ * word * elems;
    bert::KernelCost cast;
    cast.op = collective_;
    cast.kind = "cast";
    cast.collective = true;
    cast.read_bytes = 4 * elems;
    cast.write_bytes = word * elems;
    if (wire != bert::WirePrecision::fp32) add(cast);
    add(sum);
    std::swap(cast.read_bytes, cast.write_bytes);
    if (wire != bert::WirePrecision::fp32) add(cast);
  }

  int world_, reported_world_;
  std::string collective_;
};

bool is_optimizer_op(const std::string& op) {
  return op == "segment_sumsq" || op == "adam_direction" || op == "apply_update" || op == "scale";
}

void print_rows(const char* title, const std::vector<bert::CostRow>& rows, double step_seconds) {
  std::printf("%-24s %9s %10s %9s %10s %7s\n", title, "launches", "GFLOP", "GB", "time ms", "share");
  for (const bert::CostRow& r : rows) {
    std::printf("%-24s %9lld %10.2f %9.3f %10.3f %6.1f%%\n", r.name.c_str(), static_cast<long long>(r.launches),
                r.flops / 1e9, r.bytes / 1e9, r.seconds * 1e3, 100.0 * r.seconds / step_seconds);
  }
}

// The request's session config as the cost model runs it: on the "cpu" device (the session's own
// backend is replaced; the CPU one is cheapest to make) in fp32, the CUDA options modelled by
// CostModelOptions instead.
nlohmann::json modelled_config(const CostModelRequest& q, nlohmann::json config) {
  config["device"] = "cpu";
  config["train"]["precision"] = "fp32";
  config["train"]["threads"] = 1;
  config["train"]["fused_attention"] = false;
  if (q.precision == bert::Precision::fp16) config["train"]["loss_scaling"] = "dynamic";
  return config;
}

// One modelled step and what the printout names beside its prediction.
struct ModelledStep {
  bert::StepPrediction p;
  double model_flops = 0, real_token_share = 0, arena_mib = 0;
  int64_t params = 0;
};

// Runs two steps of `config` on CostModelOps and predicts the second on `device` (with its
// gradient's collectives when world > 1).
ModelledStep model_step(const CostModelRequest& q, const nlohmann::json& config, const bert::CostModelOptions& options,
                        const bert::DeviceModel& device) {
  nlohmann::json modelled = modelled_config(q, config);
  if (q.shard_optimizer) {  // reduce-scattered after the backward pass, the step driven from the host
    modelled["dist"]["bucket_mb"] = 0;
    modelled["dist"]["shard_optimizer"] = true;
  }
  // CUDA graphs as the session records them on a GPU (the validation refuses them on the "cpu"
  // device this session is configured with, so they are switched on after it).
  bert::SessionConfig session_config = bert::parse_session_config(modelled.dump());
  session_config.train.cuda_graphs = q.graphed;
  ModelledRanks* ranks = nullptr;
  std::unique_ptr<bert::Communicator> comm = bert::make_local_communicator();
  if (q.world > 1) {
    auto modelled_ranks = std::make_unique<ModelledRanks>(
        q.world, q.shard_optimizer ? "reduce-scatter + all-gather" : "allreduce (ring)");
    ranks = modelled_ranks.get();
    comm = std::move(modelled_ranks);
  }
  bert::CostModelOps* model = nullptr;
  bert::Session session(session_config, std::move(comm), [&](std::unique_ptr<bert::Ops>) {
    auto ops = std::make_unique<bert::CostModelOps>(options);
    model = ops.get();
    if (ranks) ranks->ops = model;
    return ops;
  });
  // The first step grows scratch and runs its micro-batch directly; the second (which records
  // its micro-batch when graphed, as later ones replay it) is the steady state.
  session.step(nullptr);
  model->reset();
  const bert::StepStats measured = session.step(nullptr);
  ModelledStep m;
  // Model FLOPs count full-length sequences (as DLE and MLPerf do); real data has fewer tokens.
  m.real_token_share = static_cast<double>(measured.tokens) /
                       (static_cast<double>(q.batch) * session.config().data.max_seq_length);
  if (q.model_flops) m.model_flops = q.model_flops(session.config().model.to_json());
  m.arena_mib = static_cast<double>(session.model().arena_bytes()) / 1048576.0;
  m.params = session.model().params().total_elems;

  std::vector<bert::KernelCost> kernels = model->kernels();
  if (q.shard_optimizer) {
    for (bert::KernelCost& k : kernels) {
      if (!is_optimizer_op(k.op)) continue;
      k.flops /= q.world;
      k.read_bytes /= q.world;
      k.write_bytes /= q.world;
    }
  }
  m.p = bert::predict_step(kernels, device);
  return m;
}

bool low_precision(const CostModelRequest& q) { return bert::is_16bit(q.precision); }

// The GEMM peak the request's precision runs at on `device`.
double& gemm_peak_of(const CostModelRequest& q, bert::DeviceModel& device) {
  return low_precision(q) ? device.tensor16_flops : q.precision == bert::Precision::tf32 ? device.tf32_flops : device.fp32_flops;
}

}  // namespace

bert::DeviceModel requested_device(const CostModelRequest& q) {
  bert::DeviceModel device = bert::device_model(q.device);
  if (q.peak_tflops > 0) gemm_peak_of(q, device) = q.peak_tflops * 1e12;
  if (q.bandwidth_tbs > 0) device.bandwidth = q.bandwidth_tbs * 1e12;
  BERT_CHECK(q.world >= 1, bert::Code::invalid_argument, "--world must be at least 1, got ", q.world);
  BERT_CHECK(!q.shard_optimizer || q.world > 1, bert::Code::invalid_argument,
             "--shard-optimizer 1 needs --world 2 or more");
  if (q.link_gbs > 0) device.gpu_link = q.link_gbs * 1e9;
  return device;
}

bert::CostModelOptions requested_options(const CostModelRequest& q) {
  bert::CostModelOptions options;
  options.precision = q.precision;
  options.activations_16bit = low_precision(q) && q.activations_16bit;  // as the session runs bf16/fp16
  options.fused_attention = q.fused_attention;
  return options;
}

bert::StepPrediction forecast_step(const CostModelRequest& q) {
  return model_step(q, q.config, requested_options(q), requested_device(q)).p;
}

std::unique_ptr<bert::Session> planned_session(const CostModelRequest& q) {
  const bert::SessionConfig config = bert::parse_session_config(modelled_config(q, q.config).dump());
  auto ranks = std::make_unique<ModelledRanks>(q.world, "allreduce (ring)", q.world);
  ModelledRanks* modelled = ranks.get();
  return std::make_unique<bert::Session>(config, std::move(ranks), [&](std::unique_ptr<bert::Ops>) {
    auto ops = std::make_unique<bert::CostModelOps>(requested_options(q));
    modelled->ops = ops.get();
    return ops;
  });
}

// --length-bins: each bin's step, then their mix: the session draws a bin per batch in proportion
// to its sequences, so the expected step time is the bins' step times weighted by their sequences.
void predict_length_bins(const CostModelRequest& q, const bert::CostModelOptions& options,
                         const bert::DeviceModel& device, double gemm_peak, nlohmann::json& summary) {
  const bert::SessionConfig c = bert::parse_session_config(modelled_config(q, q.config).dump());
  bert::ShardSourceOptions o;
  o.path = c.data.train_dir;
  o.format = c.data.format;
  o.max_seq_length = c.data.max_seq_length;
  o.max_predictions_per_seq = c.data.max_predictions_per_seq;
  o.vocab_size = c.model.vocab_size;
  std::printf("%-8s %10s %10s %12s %12s\n", "bin", "sequences", "step ms", "sequences/s", "real tokens");
  double weighted_seconds = 0, weighted_share = 0, sequences = 0, model_flops = 0;
  nlohmann::json bins = nlohmann::json::array();
  for (const bert::LengthBin& bin : bert::list_length_bins(o)) {
    nlohmann::json config = q.config;
    config["data"]["train_dir"] = bin.path;
    config["data"]["length_bins"] = false;
    const ModelledStep m = model_step(q, config, options, device);
    std::printf("%-8s %10llu %10.3f %12.1f %11.1f%%\n", bin.name.c_str(), static_cast<unsigned long long>(bin.rows),
                m.p.seconds * 1e3, q.batch / m.p.seconds, 100 * m.real_token_share);
    weighted_seconds += static_cast<double>(bin.rows) * m.p.seconds;
    weighted_share += static_cast<double>(bin.rows) * m.real_token_share;
    sequences += static_cast<double>(bin.rows);
    model_flops = m.model_flops;
    bins.push_back({{"bin", bin.name}, {"sequences", bin.rows}, {"predicted_step_seconds", m.p.seconds},
                    {"real_token_share", m.real_token_share}});
  }
  const double step = weighted_seconds / sequences, mfu = model_flops / step / gemm_peak;
  const double real_token_share = weighted_share / sequences;
  std::printf("\npredicted step over the bins' mix (each drawn in proportion to its sequences) %.3f ms, "
              "%.1f sequences/s per GPU, MFU %.1f%% (model FLOPs of full-length sequences; real tokens "
              "%.1f%% of them)\n",
              step * 1e3, q.batch / step, 100 * mfu, 100 * real_token_share);
  summary.update({{"length_bins", bins},
                  {"predicted_step_seconds", step},
                  {"predicted_sequences_per_second", q.batch / step},
                  {"predicted_mfu", mfu},
                  {"model_flops", model_flops},
                  {"real_token_share", real_token_share}});
}

// One step's prediction: its ops and kernel kinds, the step, and the exposed collectives.
void predict_step(const CostModelRequest& q, const bert::CostModelOptions& options, const bert::DeviceModel& device,
                  double gemm_peak, nlohmann::json& summary) {
  const ModelledStep m = model_step(q, q.config, options, device);
  const bert::StepPrediction& p = m.p;
  const double mfu = m.model_flops / p.seconds / gemm_peak;
  print_rows("op", p.by_op, p.seconds);
  std::printf("\n");
  print_rows("kernel kind", p.by_kind, p.seconds);
  std::printf("\npredicted step %.3f ms, %.1f sequences/s per GPU, MFU %.1f%% (%.3f TFLOP model FLOPs of full-length "
              "sequences; real tokens %.1f%% of them), %lld launches\n"
              "activation arena %.1f MiB (the engine's own accounting for this shape)\n",
              p.seconds * 1e3, q.batch / p.seconds, 100 * mfu, m.model_flops / 1e12, 100 * m.real_token_share,
              static_cast<long long>(p.launches), m.arena_mib);
  if (q.world > 1) {
    std::printf("gradient collectives over %d GPUs (%.0f GB/s each): %.3f ms on the communicator's stream, %.3f ms "
                "of it exposed (the rest overlaps the backward pass)\n",
                q.world, device.gpu_link / 1e9, p.collective_seconds * 1e3, p.exposed_collective_seconds * 1e3);
    summary.update({{"collective_seconds", p.collective_seconds},
                    {"exposed_collective_seconds", p.exposed_collective_seconds}});
  }
  summary.update({{"predicted_step_seconds", p.seconds},
                  {"predicted_sequences_per_second", q.batch / p.seconds},
                  {"predicted_mfu", mfu},
                  {"model_flops", m.model_flops},
                  {"launches", p.launches},
                  {"parameters", m.params},
                  {"real_token_share", m.real_token_share},
                  {"activation_arena_mib", m.arena_mib}});
}

int run_cost_model(const CostModelRequest& q) {
  try {
    bert::DeviceModel device = requested_device(q);
    const double gemm_peak = gemm_peak_of(q, device);
    const bool lowp = low_precision(q);
    const char* precision = bert::precision_name(q.precision);
    const bert::CostModelOptions options = requested_options(q);
    std::printf("PREDICTION (cost model, not a measurement): %s, %s, %.0f TFLOP/s %s, %.2f TB/s, %s activations, %s%.0f us "
                "per %slaunch%s\n",
                q.device.c_str(), precision, gemm_peak / 1e12, lowp ? "16-bit" : precision,
                device.bandwidth / 1e12, options.activations_16bit ? precision : "fp32",
                q.graphed ? "micro-batches graphed (no launch cost inside), " : "", device.launch_seconds * 1e6,
                q.graphed ? "other " : "", device.kind_efficiency.empty() ? "" : ", kernel kinds at their measured share of the roofline");
    nlohmann::json summary = {{"cost_model", q.device},
                              {"precision", precision},
                              {"graphed", q.graphed},
                              {"world", q.world},
                              {"fused_attention", q.fused_attention},
                              {"activations_16bit", options.activations_16bit},
                              {"shard_optimizer", q.shard_optimizer}};
    if (q.config["data"].value("length_bins", false)) {
      predict_length_bins(q, options, device, gemm_peak, summary);
    } else {
      predict_step(q, options, device, gemm_peak, summary);
    }
    std::printf("%s\n", summary.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: cost model: %s\n", e.what());
    return 1;
  }
}

}  // namespace bert_tools
