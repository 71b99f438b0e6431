// The cost model (backend/cost_model_ops.h) against the emulated GPU. A bert-tiny bf16 training
// step (16-bit activations, as sessions run bf16) runs through a Session on CudaOps over the emulation, with the cost model wrapped around it
// and, between the two, EmulatorTrafficOps attributing the emulator's counters (launches, stream
// waits, and the bytes kernels load and store, seen through the access hooks of
// emu_kernels_counted) to each Ops call. Per op, the model's device bytes must match the
// emulator's within kByteTolerance, its launches and host waits exactly; its GEMM FLOPs must
// equal the analytic count (3 x forward: 2mnk per dense layer, QK^T and PV, the heads). Also:
// softmax_xent makes no host round trip (no stream wait, no label copy). The fused residual
// blocks (residual_layernorm_fwd/bwd) are among the ops compared. The device-resident optimizer
// step (what a recorded step runs) is compared on its own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "backend/cost_model_ops.h"
#include "cuda_runtime_emu.h"
#include "data/synthetic_source.h"
#include "dist/communicator.h"
#include "model/model_inputs.h"
#include "model/param_table.h"
#include "session/session.h"

namespace bert {
namespace {

// Per-op bytes: the model must be within this fraction of the emulator's count (measured: at
// most 0.46%, gather_rows, from tensors that start mid-sector; the whole step 0.004%). Ops with
// a sort (scatter_add_rows, embedding_bwd) get kSortTolerance: the model's sort kernels (CUB's
// radix sort, 68 bytes per row) are left out of the comparison, while the emulator's
// std::stable_sort stand-in still moves 16 bytes per row (measured: 4.0% where the rows added are
// bf16, scatter_add_rows on the MLM head's 20 rows).
constexpr double kByteTolerance = 0.005;
constexpr double kSortTolerance = 0.05;

struct OpTraffic {
  int64_t launches = 0, syncs = 0;
  double bytes = 0;
};

// Forwards every call to the emulated CudaOps and adds the emulator's counter deltas to the op.
class EmulatorTrafficOps final : public Ops {
 public:
  explicit EmulatorTrafficOps(std::unique_ptr<Ops> inner) : inner_(std::move(inner)) {}
  const std::map<std::string, OpTraffic>& per_op() const { return per_op_; }
  void reset() { per_op_.clear(); }

  std::string name() const override { return inner_->name(); }
  void* alloc(size_t bytes) override { return inner_->alloc(bytes); }
  void release(void* ptr) override { inner_->release(ptr); }
  void upload(void* dst, const void* src, size_t bytes) override {
    count("upload", [&] { inner_->upload(dst, src, bytes); });
  }
  void download(void* dst, const void* src, size_t bytes) override {
    count("download", [&] { inner_->download(dst, src, bytes); });
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    count("copy", [&] { inner_->copy(dst, src, bytes); });
  }
  void fill_zero(void* dst, size_t bytes) override {
    count("fill_zero", [&] { inner_->fill_zero(dst, bytes); });
  }
  void synchronize() override { count("synchronize", [&] { inner_->synchronize(); }); }
  size_t peak_bytes() const override { return inner_->peak_bytes(); }
  void* native_stream() override { return inner_->native_stream(); }
  DType activation_type() const override { return inner_->activation_type(); }
  int64_t attention_saved_elems(int64_t max_seqs, int64_t max_len, int heads) const override {
    return inner_->attention_saved_elems(max_seqs, max_len, heads);
  }
  void set_weights(const float* p, int64_t n) override { inner_->set_weights(p, n); }
  void weights_changed() override { inner_->weights_changed(); }

 private:
  void embedding_fwd_impl(Act out, const int32_t* w, const int32_t* p, const int32_t* t, const float* we,
                          const float* pe, const float* te, int64_t T, int H) override {
    count("embedding_fwd", [&] { inner_->embedding_fwd(out, w, p, t, we, pe, te, T, H); });
  }
  void embedding_bwd_impl(float* dw, float* dp, float* dt, ConstAct dout, const int32_t* w, const int32_t* p,
                          const int32_t* t, int64_t T, int H) override {
    count("embedding_bwd", [&] { inner_->embedding_bwd(dw, dp, dt, dout, w, p, t, T, H); });
  }
  void linear_fwd_impl(Act out, Act pre, ConstAct in, const float* W, const float* b, int64_t M, int K, int N,
                       Activation act) override {
    count("linear_fwd", [&] { inner_->linear_fwd(out, pre, in, W, b, M, K, N, act); });
  }
  void linear_bwd_impl(Act din, float* dW, float* db, ConstAct dout, ConstAct in, const float* W,
                       ConstAct pre, Act scratch, int64_t M, int K, int N, Activation act, bool acc) override {
    count("linear_bwd", [&] { inner_->linear_bwd(din, dW, db, dout, in, W, pre, scratch, M, K, N, act, acc); });
  }
  void activation_fwd_impl(Act out, ConstAct pre, int64_t n, Activation act) override {
    count("activation_fwd", [&] { inner_->activation_fwd(out, pre, n, act); });
  }
  void layernorm_fwd_impl(Act out, float* mean, float* rstd, ConstAct in, const float* g, const float* b, int64_t M,
                          int N, float eps) override {
    count("layernorm_fwd", [&] { inner_->layernorm_fwd(out, mean, rstd, in, g, b, M, N, eps); });
  }
  void layernorm_bwd_impl(Act din, float* dg, float* db, ConstAct dout, ConstAct in, const float* mean,
                          const float* rstd, const float* g, int64_t M, int N) override {
    count("layernorm_bwd", [&] { inner_->layernorm_bwd(din, dg, db, dout, in, mean, rstd, g, M, N); });
  }
  void dropout_residual_fwd_impl(Act out, ConstAct in, ConstAct res, int64_t n,
                                 const DropoutSite& site) override {
    count("dropout_residual_fwd", [&] { inner_->dropout_residual_fwd(out, in, res, n, site); });
  }
  void dropout_bwd_impl(Act din, ConstAct dout, int64_t n, const DropoutSite& site) override {
    count("dropout_bwd", [&] { inner_->dropout_bwd(din, dout, n, site); });
  }
  void residual_layernorm_fwd_impl(Act out, Act res, float* mean, float* rstd, ConstAct in,
                                   ConstAct residual, const float* g, const float* b, int64_t M, int N, float eps,
                                   const DropoutSite& site) override {
    count("residual_layernorm_fwd",
          [&] { inner_->residual_layernorm_fwd(out, res, mean, rstd, in, residual, g, b, M, N, eps, site); });
  }
  void residual_layernorm_bwd_impl(Act d_in, Act d_residual, float* dg, float* db, ConstAct dout,
                                   ConstAct res, const float* mean, const float* rstd, const float* g, int64_t M,
                                   int N, const DropoutSite& site) override {
    count("residual_layernorm_bwd", [&] {
      inner_->residual_layernorm_bwd(d_in, d_residual, dg, db, dout, res, mean, rstd, g, M, N, site);
    });
  }
  void attention_fwd_impl(Act ctx, Act probs, ConstAct qkv, const float* kb, const AttentionLayout& layout,
                          int heads, int head_dim, const DropoutSite& site) override {
    count("attention_fwd", [&] { inner_->attention_fwd(ctx, probs, qkv, kb, layout, heads, head_dim, site); });
  }
  void attention_bwd_impl(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv, ConstAct probs,
                          const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site) override {
    count("attention_bwd", [&] { inner_->attention_bwd(dqkv, dctx, ctx, qkv, probs, layout, heads, head_dim, site); });
  }
  void gather_rows_impl(Act out, ConstAct in, const int32_t* rows, int64_t n, int H) override {
    count("gather_rows", [&] { inner_->gather_rows(out, in, rows, n, H); });
  }
  void scatter_add_rows_impl(Act dst, ConstAct src, const int32_t* rows, int64_t n, int H) override {
    count("scatter_add_rows", [&] { inner_->scatter_add_rows(dst, src, rows, n, H); });
  }
  void softmax_xent_impl(Act dl, float* losses, int32_t* correct, ConstAct logits, const int32_t* labels,
                         int64_t M, int V, int ld, ScaleArg grad_scale) override {
    count("softmax_xent", [&] { inner_->softmax_xent(dl, losses, correct, logits, labels, M, V, ld, grad_scale); });
  }
  void segment_sumsq_impl(double* out, const float* x, const std::vector<ParamSegment>& segs) override {
    count("segment_sumsq", [&] { inner_->segment_sumsq(out, x, segs); });
  }
  void adam_direction_impl(float* u, float* m, float* v, const float* g, const float* p,
                           const std::vector<ParamSegment>& segs, const AdamStepArgs& args,
                           double* sumsq) override {
    count("adam_direction", [&] { inner_->adam_direction(u, m, v, g, p, segs, args, sumsq); });
  }
  void apply_update_impl(float* p, const float* u, const std::vector<ParamSegment>& segs,
                         const std::vector<float>& scales) override {
    count("apply_update", [&] { inner_->apply_update(p, u, segs, scales); });
  }
  void optimizer_step_impl(float* p, float* m, float* v, float* u, const float* g,
                           const std::vector<ParamSegment>& segs, TrustRatio trust, OptimizerStepState* state) override {
    count("optimizer_step", [&] { inner_->optimizer_step(p, m, v, u, g, segs, trust, state); });
  }
  void scale_impl(float* x, float a, int64_t n) override {
    count("scale", [&] { inner_->scale(x, a, n); });
  }

  template <typename Call>
  void count(const char* op, Call&& call) {
    const cuda_emu::Traffic before = cuda_emu::traffic();
    call();
    const cuda_emu::Traffic& after = cuda_emu::traffic();
    OpTraffic& t = per_op_[op];
    t.launches += (after.kernel_launches - before.kernel_launches) + (after.gemm_launches - before.gemm_launches) +
                  (after.device_copies - before.device_copies) + (after.host_copies - before.host_copies);
    t.syncs += after.stream_syncs - before.stream_syncs;
    t.bytes += static_cast<double>((after.read_bytes - before.read_bytes) + (after.write_bytes - before.write_bytes));
  }

  std::unique_ptr<Ops> inner_;
  std::map<std::string, OpTraffic> per_op_;
};

TEST(EmulatedTraffic, SoftmaxCrossEntropyMakesNoHostRoundTrip) {
  std::unique_ptr<Ops> gpu = make_cuda_ops(0, CudaOptions{});
  const int64_t M = 6;
  const int V = 96;
  std::vector<float> host_logits(M * V, 0.5f);
  std::vector<int32_t> labels = {1, 2, -1, 95, 0, 7};
  auto* logits = static_cast<float*>(gpu->alloc(M * V * sizeof(float)));
  auto* losses = static_cast<float*>(gpu->alloc(M * sizeof(float)));
  auto* label_buf = static_cast<int32_t*>(gpu->alloc(M * sizeof(int32_t)));
  gpu->upload(logits, host_logits.data(), host_logits.size() * sizeof(float));
  gpu->upload(label_buf, labels.data(), labels.size() * sizeof(int32_t));
  const cuda_emu::Traffic before = cuda_emu::traffic();
  gpu->softmax_xent(logits, losses, nullptr, logits, label_buf, M, V, V, 1.0f);
  const cuda_emu::Traffic& after = cuda_emu::traffic();
  EXPECT_EQ(after.stream_syncs - before.stream_syncs, 0) << "softmax_xent waited for the stream";
  EXPECT_EQ(after.host_to_device_bytes - before.host_to_device_bytes, 0);
  EXPECT_EQ(after.device_to_host_bytes - before.device_to_host_bytes, 16) << "only the 16-byte label status";
  EXPECT_EQ(after.kernel_launches - before.kernel_launches, 1);
  for (void* p : {static_cast<void*>(logits), static_cast<void*>(losses), static_cast<void*>(label_buf)})
    gpu->release(p);
}

// Analytic GEMM FLOPs of one training step on `in`: 3 x the forward's 2mnk (the forward, the
// input gradient and the weight gradient of every GEMM), i.e. 6 x dense parameters x tokens plus
// attention's QK^T and PV over each sequence's own length, plus the heads.
double analytic_gemm_flops(const BertConfig& m, const ModelInputs& in) {
  const double H = m.hidden_size, I = m.intermediate_size, L = m.num_hidden_layers;
  const double Vp = (m.vocab_size + 7) / 8 * 8, T = static_cast<double>(in.layout.total_tokens());
  double sum_len2 = 0;
  for (int b = 0; b < in.layout.num_seqs(); ++b) {
    const double len = in.layout.seq_start[b + 1] - in.layout.seq_start[b];
    sum_len2 += len * len;
  }
  const double dense = T * 2 * (4 * H * H + 2 * H * I);  // QKV (3H^2), output (H^2), FFN (2HI)
  const double attention = 2.0 * 2.0 * sum_len2 * H;     // QK^T and PV over all heads
  const double B = in.layout.num_seqs(), Nm = static_cast<double>(in.mlm_rows.size());
  const double heads = Nm * 2 * (H * H + H * Vp) + B * 2 * (H * H + 2 * H);  // MLM; pooler + NSP
  return 3 * (L * (dense + attention) + heads);
}

// unpad: packed sequences of their own lengths (the attention's per-sequence path and its
// sequence table) instead of the padded batch (the by-head path).
void expect_cost_model_matches_emulator(bool unpad) {
  const int B = 4, S = 32, P = 5;
  SessionConfig config = parse_session_config(R"({"model": "bert-tiny", "device": "cuda",
      "train": {"micro_batch": 4, "precision": "bf16", "steps": 10, "seed": 7},
      "data": {"max_seq_length": 32, "max_predictions_per_seq": 5, "unpad": )" +
                                              std::string(unpad ? "true" : "false") + "}}");
  CostModelOps* model = nullptr;
  EmulatorTrafficOps* emulator = nullptr;
  CostModelOptions options;
  options.precision = Precision::bf16;
  Session session(config, make_local_communicator(), [&](std::unique_ptr<Ops> cuda) {
    auto traffic = std::make_unique<EmulatorTrafficOps>(std::move(cuda));
    emulator = traffic.get();
    auto cost = std::make_unique<CostModelOps>(options, std::move(traffic));
    model = cost.get();
    return cost;
  });
  SyntheticOptions data;
  data.vocab_size = config.model.vocab_size;
  data.seq_length = S;
  data.max_predictions = P;
  std::unique_ptr<DataSource> source = make_synthetic_source(data);
  HostBatch batch;
  source->next(batch, B);
  const BatchView v = view_of(batch);
  session.step(&v);  // first step: scratch buffers grow (allocations, zero fills, waits)
  model->reset();
  emulator->reset();
  session.step(&v);  // the same shapes again: the steady state

  std::map<std::string, OpTraffic> predicted;
  for (const KernelCost& k : model->kernels()) {
    OpTraffic& t = predicted[k.op];
    if (k.kind != "sort") t.launches += k.launches;
    if (k.host_wait) ++t.syncs;
    if (k.kind != "sort") t.bytes += k.read_bytes + k.write_bytes;
  }
  ASSERT_EQ(predicted.size(), emulator->per_op().size());
  // The encoder's residual blocks run fused (2 per layer each way); no residual copy is left.
  ASSERT_TRUE(emulator->per_op().count("residual_layernorm_fwd") && emulator->per_op().count("residual_layernorm_bwd"));
  EXPECT_EQ(emulator->per_op().count("copy"), 0u);
  double total_model = 0, total_emulator = 0;
  for (const auto& [op, measured] : emulator->per_op()) {
    ASSERT_TRUE(predicted.count(op)) << op;
    const OpTraffic& p = predicted[op];
    std::printf("%-22s bytes: model %12.0f emulator %12.0f (%+.3f%%)  launches %6lld / %6lld  waits %lld / %lld\n",
                op.c_str(), p.bytes, measured.bytes, measured.bytes > 0 ? 100 * (p.bytes / measured.bytes - 1) : 0.0,
                static_cast<long long>(p.launches), static_cast<long long>(measured.launches),
                static_cast<long long>(p.syncs), static_cast<long long>(measured.syncs));
    EXPECT_EQ(p.launches, measured.launches) << op;
    EXPECT_EQ(p.syncs, measured.syncs) << op;
    const bool sorts = op == "embedding_bwd" || op == "scatter_add_rows";
    EXPECT_NEAR(p.bytes, measured.bytes, (sorts ? kSortTolerance : kByteTolerance) * measured.bytes) << op;
    total_model += p.bytes;
    total_emulator += measured.bytes;
  }
  std::printf("total bytes: model %.0f emulator %.0f (%+.3f%%)\n", total_model, total_emulator,
              100 * (total_model / total_emulator - 1));
  EXPECT_NEAR(total_model, total_emulator, kByteTolerance * total_emulator);

  // Tokens, sequence lengths and masked rows as the model reads the batch.
  const ModelInputs in = build_model_inputs(v, config.model, config.task, B, S, P, bert::Padding{config.data.unpad}, true);
  if (unpad) {
    ASSERT_EQ(in.layout.uniform_length(), 0) << "the batch should have sequences of several lengths";
  }
  const StepPrediction step = predict_step(model->kernels(), device_model("h100"));
  const double analytic = analytic_gemm_flops(config.model, in);
  std::printf("GEMM FLOPs: model %.6e analytic %.6e\n", step.gemm_flops, analytic);
  EXPECT_NEAR(step.gemm_flops, analytic, 1e-12 * analytic);
}

TEST(EmulatedTraffic, CostModelMatchesTheEmulatedGpuOnBertTiny) { expect_cost_model_matches_emulator(false); }

TEST(EmulatedTraffic, CostModelMatchesTheEmulatedGpuOnUnpaddedBertTiny) {
  expect_cost_model_matches_emulator(true);
}

// The device-resident optimizer step (Ops::optimizer_step, LAMB, as a recorded step runs it) over
// bert-tiny's tensors: the model's launches, host waits (none) and bytes against the emulator's,
// on the second call (the first uploads its segment table).
TEST(EmulatedTraffic, CostModelMatchesTheEmulatedGpuOnTheDeviceOptimizerStep) {
  auto traffic = std::make_unique<EmulatorTrafficOps>(make_cuda_ops(0, CudaOptions{Precision::bf16}));
  EmulatorTrafficOps* emulator = traffic.get();
  CostModelOptions options;
  options.precision = Precision::bf16;
  CostModelOps model(options, std::move(traffic));
  const ParamTable table(parse_session_config(R"({"model": "bert-tiny"})").model);
  const std::vector<ParamSegment> segs = table.segments(0.01f);
  const int64_t n = table.total_elems;
  std::vector<float*> buffers;
  for (int i = 0; i < 5; ++i) buffers.push_back(static_cast<float*>(model.alloc(n * sizeof(float))));
  auto* state = static_cast<OptimizerStepState*>(model.alloc(sizeof(OptimizerStepState)));
  OptimizerStepState inputs;
  inputs.lr = 1e-3;
  model.upload(state, &inputs, sizeof inputs);
  const auto step = [&] {
    model.optimizer_step(buffers[0], buffers[1], buffers[2], buffers[3], buffers[4], segs, TrustRatio::decayed, state);
  };
  step();
  model.reset();
  emulator->reset();
  step();
  OpTraffic predicted;
  for (const KernelCost& k : model.kernels()) {
    predicted.launches += k.launches;
    predicted.syncs += k.host_wait;
    predicted.bytes += k.read_bytes + k.write_bytes;
  }
  ASSERT_EQ(emulator->per_op().size(), 1u);
  const OpTraffic& measured = emulator->per_op().at("optimizer_step");
  std::printf("optimizer_step bytes: model %.0f emulator %.0f (%+.3f%%)  launches %lld / %lld\n", predicted.bytes,
              measured.bytes, 100 * (predicted.bytes / measured.bytes - 1), static_cast<long long>(predicted.launches),
              static_cast<long long>(measured.launches));
  EXPECT_EQ(predicted.launches, measured.launches);
  EXPECT_EQ(predicted.syncs, 0);
  EXPECT_EQ(measured.syncs, 0);
  EXPECT_NEAR(predicted.bytes, measured.bytes, kByteTolerance * measured.bytes);
  for (float* b : buffers) model.release(b);
  model.release(state);
}

}  // namespace
}  // namespace bert
