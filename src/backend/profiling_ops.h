// ProfilingOps: an Ops that forwards every call to another backend and records, per operation,
// how often it ran and for how long. Each call is bracketed by the backend's synchronize(), so
// the time is the operation's own (GPU kernels included) at the price of losing the overlap
// between consecutive kernels — a profile, not a throughput measurement.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "backend/ops.h"

namespace bert {

struct OpTiming {
  int64_t calls = 0;
  double seconds = 0;
};

class ProfilingOps final : public Ops {
 public:
  explicit ProfilingOps(std::unique_ptr<Ops> inner) : inner_(std::move(inner)) {}

  // Per operation name ("linear_fwd", "attention_bwd", ...): calls and seconds since the last reset.
  const std::map<std::string, OpTiming>& timings() const { return timings_; }
  void reset() { timings_.clear(); }

  std::string name() const override { return inner_->name() + " (profiled)"; }
  void* alloc(size_t bytes) override;
  void release(void* ptr) override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override { inner_->synchronize(); }
  size_t peak_bytes() const override { return inner_->peak_bytes(); }
  void* native_stream() override { return inner_->native_stream(); }
  int device() const override { return inner_->device(); }
  DType activation_type() const override { return inner_->activation_type(); }
  int64_t attention_saved_elems(int64_t max_seqs, int64_t max_len, int heads) const override {
    return inner_->attention_saved_elems(max_seqs, max_len, heads);
  }
  void set_weights(const float* params, int64_t n) override { inner_->set_weights(params, n); }
  void weights_changed() override { inner_->weights_changed(); }


 private:
  // Ops' implementations (their arguments were checked by the Ops method that calls them).
  void embedding_fwd_impl(Act out, const int32_t* word_ids, const int32_t* pos_ids, const int32_t* type_ids,
                          const float* word_emb, const float* pos_emb, const float* type_emb, int64_t T, int H) override;
  void embedding_bwd_impl(float* dword, float* dpos, float* dtype, ConstAct dout, const int32_t* word_ids,
                          const int32_t* pos_ids, const int32_t* type_ids, int64_t T, int H) override;
  void linear_fwd_impl(Act out, Act pre_act, ConstAct in, const float* W, const float* b, int64_t M, int K,
                       int N, Activation act) override;
  void linear_bwd_impl(Act din, float* dW, float* db, ConstAct dout, ConstAct in, const float* W,
                       ConstAct pre_act, Act dpre_scratch, int64_t M, int K, int N, Activation act,
                       bool accumulate_din) override;
  void activation_fwd_impl(Act out, ConstAct pre, int64_t n, Activation act) override;
  void layernorm_fwd_impl(Act out, float* mean, float* rstd, ConstAct in, const float* gamma, const float* beta,
                          int64_t M, int N, float eps) override;
  void layernorm_bwd_impl(Act din, float* dgamma, float* dbeta, ConstAct dout, ConstAct in, const float* mean,
                          const float* rstd, const float* gamma, int64_t M, int N) override;
  void dropout_residual_fwd_impl(Act out, ConstAct in, ConstAct residual, int64_t n,
                                 const DropoutSite& site) override;
  void dropout_bwd_impl(Act din, ConstAct dout, int64_t n, const DropoutSite& site) override;
  void residual_layernorm_fwd_impl(Act out, Act res, float* mean, float* rstd, ConstAct in,
                                   ConstAct residual, const float* gamma, const float* beta, int64_t M, int N,
                                   float eps, const DropoutSite& site) override;
  void residual_layernorm_bwd_impl(Act d_in, Act d_residual, float* dgamma, float* dbeta, ConstAct dout,
                                   ConstAct res, const float* mean, const float* rstd, const float* gamma,
                                   int64_t M, int N, const DropoutSite& site) override;
  void attention_fwd_impl(Act ctx, Act probs, ConstAct qkv, const float* key_bias, const AttentionLayout& layout,
                          int heads, int head_dim, const DropoutSite& site) override;
  void attention_bwd_impl(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv, ConstAct probs,
                          const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site) override;
  void gather_rows_impl(Act out, ConstAct in, const int32_t* rows, int64_t n, int H) override;
  void scatter_add_rows_impl(Act dst, ConstAct src, const int32_t* rows, int64_t n, int H) override;
  void softmax_xent_impl(Act dlogits, float* losses, int32_t* correct, ConstAct logits, const int32_t* labels,
                         int64_t M, int V, int ld, ScaleArg grad_scale) override;
  void segment_sumsq_impl(double* host_out, const float* x, const std::vector<ParamSegment>& segs) override;
  void adam_direction_impl(float* update, float* m, float* v, const float* grad, const float* param,
                           const std::vector<ParamSegment>& segs, const AdamStepArgs& args,
                           double* host_sumsq) override;
  void apply_update_impl(float* param, const float* update, const std::vector<ParamSegment>& segs,
                         const std::vector<float>& host_scale) override;
  void optimizer_step_impl(float* param, float* m, float* v, float* update, const float* grad,
                           const std::vector<ParamSegment>& segs, TrustRatio trust,
                           OptimizerStepState* state) override;
  void scale_impl(float* x, float a, int64_t n) override;

  // Runs call() between two synchronisations and adds its time to timings_[op].
  template <typename Call>
  void timed(const char* op, Call&& call) {
    inner_->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    inner_->synchronize();
    OpTiming& t = timings_[op];
    t.calls += 1;
    t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  std::unique_ptr<Ops> inner_;
  std::map<std::string, OpTiming> timings_;
};

}  // namespace bert
