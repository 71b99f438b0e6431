// ProfilingOps: each operation forwarded to the wrapped backend inside timed() (see the header).
#include "backend/profiling_ops.h"

namespace bert {
namespace {

// Dense layers with a fused activation are reported apart from plain ones.
const char* linear_name(bool forward, Activation act) {
  if (act == Activation::none) return forward ? "linear_fwd" : "linear_bwd";
  return forward ? "linear_fwd+activation" : "linear_bwd+activation";
}

}  // namespace

void* ProfilingOps::alloc(size_t bytes) {
  void* p = nullptr;
  timed("alloc", [&] { p = inner_->alloc(bytes); });
  return p;
}
void ProfilingOps::release(void* ptr) {
  timed("release", [&] { inner_->release(ptr); });
}
void ProfilingOps::upload(void* dst, const void* host_src, size_t bytes) {
  timed("upload", [&] { inner_->upload(dst, host_src, bytes); });
}
void ProfilingOps::download(void* host_dst, const void* src, size_t bytes) {
  timed("download", [&] { inner_->download(host_dst, src, bytes); });
}
void ProfilingOps::copy(void* dst, const void* src, size_t bytes) {
  timed("copy", [&] { inner_->copy(dst, src, bytes); });
}
void ProfilingOps::fill_zero(void* dst, size_t bytes) {
  timed("fill_zero", [&] { inner_->fill_zero(dst, bytes); });
}

void ProfilingOps::embedding_fwd_impl(Act out, const int32_t* word_ids, const int32_t* pos_ids,
                                      const int32_t* type_ids, const float* word_emb, const float* pos_emb,
                                      const float* type_emb, int64_t T, int H) {
  timed("embedding_fwd",
        [&] { inner_->embedding_fwd(out, word_ids, pos_ids, type_ids, word_emb, pos_emb, type_emb, T, H); });
}
void ProfilingOps::embedding_bwd_impl(float* dword, float* dpos, float* dtype, ConstAct dout, const int32_t* word_ids,
                                      const int32_t* pos_ids, const int32_t* type_ids, int64_t T, int H) {
  timed("embedding_bwd", [&] { inner_->embedding_bwd(dword, dpos, dtype, dout, word_ids, pos_ids, type_ids, T, H); });
}
void ProfilingOps::linear_fwd_impl(Act out, Act pre_act, ConstAct in, const float* W, const float* b, int64_t M,
                                   int K, int N, Activation act) {
  timed(linear_name(true, act), [&] { inner_->linear_fwd(out, pre_act, in, W, b, M, K, N, act); });
}
void ProfilingOps::linear_bwd_impl(Act din, float* dW, float* db, ConstAct dout, ConstAct in, const float* W,
                                   ConstAct pre_act, Act dpre_scratch, int64_t M, int K, int N, Activation act,
                                   bool accumulate_din) {
  timed(linear_name(false, act),
        [&] { inner_->linear_bwd(din, dW, db, dout, in, W, pre_act, dpre_scratch, M, K, N, act, accumulate_din); });
}
void ProfilingOps::activation_fwd_impl(Act out, ConstAct pre, int64_t n, Activation act) {
  timed("activation_fwd", [&] { inner_->activation_fwd(out, pre, n, act); });
}
void ProfilingOps::layernorm_fwd_impl(Act out, float* mean, float* rstd, ConstAct in, const float* gamma,
                                      const float* beta, int64_t M, int N, float eps) {
  timed("layernorm_fwd", [&] { inner_->layernorm_fwd(out, mean, rstd, in, gamma, beta, M, N, eps); });
}
void ProfilingOps::layernorm_bwd_impl(Act din, float* dgamma, float* dbeta, ConstAct dout, ConstAct in,
                                      const float* mean, const float* rstd, const float* gamma, int64_t M, int N) {
  timed("layernorm_bwd", [&] { inner_->layernorm_bwd(din, dgamma, dbeta, dout, in, mean, rstd, gamma, M, N); });
}
void ProfilingOps::dropout_residual_fwd_impl(Act out, ConstAct in, ConstAct residual, int64_t n,
                                             const DropoutSite& site) {
  timed("dropout_residual_fwd", [&] { inner_->dropout_residual_fwd(out, in, residual, n, site); });
}
void ProfilingOps::dropout_bwd_impl(Act din, ConstAct dout, int64_t n, const DropoutSite& site) {
  timed("dropout_bwd", [&] { inner_->dropout_bwd(din, dout, n, site); });
}
void ProfilingOps::residual_layernorm_fwd_impl(Act out, Act res, float* mean, float* rstd, ConstAct in,
                                               ConstAct residual, const float* gamma, const float* beta, int64_t M,
                                               int N, float eps, const DropoutSite& site) {
  timed("residual_layernorm_fwd",
        [&] { inner_->residual_layernorm_fwd(out, res, mean, rstd, in, residual, gamma, beta, M, N, eps, site); });
}
void ProfilingOps::residual_layernorm_bwd_impl(Act d_in, Act d_residual, float* dgamma, float* dbeta,
                                               ConstAct dout, ConstAct res, const float* mean,
                                               const float* rstd, const float* gamma, int64_t M, int N,
                                               const DropoutSite& site) {
  timed("residual_layernorm_bwd", [&] {
    inner_->residual_layernorm_bwd(d_in, d_residual, dgamma, dbeta, dout, res, mean, rstd, gamma, M, N, site);
  });
}
void ProfilingOps::attention_fwd_impl(Act ctx, Act probs, ConstAct qkv, const float* key_bias,
                                      const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site) {
  timed("attention_fwd", [&] { inner_->attention_fwd(ctx, probs, qkv, key_bias, layout, heads, head_dim, site); });
}
void ProfilingOps::attention_bwd_impl(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv, ConstAct probs,
                                      const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site) {
  timed("attention_bwd", [&] { inner_->attention_bwd(dqkv, dctx, ctx, qkv, probs, layout, heads, head_dim, site); });
}
void ProfilingOps::gather_rows_impl(Act out, ConstAct in, const int32_t* rows, int64_t n, int H) {
  timed("gather_rows", [&] { inner_->gather_rows(out, in, rows, n, H); });
}
void ProfilingOps::scatter_add_rows_impl(Act dst, ConstAct src, const int32_t* rows, int64_t n, int H) {
  timed("scatter_add_rows", [&] { inner_->scatter_add_rows(dst, src, rows, n, H); });
}
void ProfilingOps::softmax_xent_impl(Act dlogits, float* losses, int32_t* correct, ConstAct logits,
                                     const int32_t* labels, int64_t M, int V, int ld, ScaleArg grad_scale) {
  timed("softmax_xent", [&] { inner_->softmax_xent(dlogits, losses, correct, logits, labels, M, V, ld, grad_scale); });
}
void ProfilingOps::segment_sumsq_impl(double* host_out, const float* x, const std::vector<ParamSegment>& segs) {
  timed("segment_sumsq", [&] { inner_->segment_sumsq(host_out, x, segs); });
}
void ProfilingOps::adam_direction_impl(float* update, float* m, float* v, const float* grad, const float* param,
                                       const std::vector<ParamSegment>& segs, const AdamStepArgs& args,
                                       double* host_sumsq) {
  timed("adam_direction", [&] { inner_->adam_direction(update, m, v, grad, param, segs, args, host_sumsq); });
}
void ProfilingOps::apply_update_impl(float* param, const float* update, const std::vector<ParamSegment>& segs,
                                     const std::vector<float>& host_scale) {
  timed("apply_update", [&] { inner_->apply_update(param, update, segs, host_scale); });
}
void ProfilingOps::optimizer_step_impl(float* param, float* m, float* v, float* update, const float* grad,
                                       const std::vector<ParamSegment>& segs, TrustRatio trust,
                                       OptimizerStepState* state) {
  timed("optimizer_step", [&] { inner_->optimizer_step(param, m, v, update, grad, segs, trust, state); });
}
void ProfilingOps::scale_impl(float* x, float a, int64_t n) {
  timed("scale", [&] { inner_->scale(x, a, n); });
}

}  // namespace bert
