// The public Ops methods: each checks its arguments once, for every backend, with the same
// messages, then calls the backend's implementation (the *_impl methods), which starts at the
// math. Only shapes and scalars are checked here; buffer sizes are the caller's contract.
#include "backend/ops.h"

#include "core/error.h"

namespace bert {
namespace {

void check_linear_shape(const char* op, int64_t M, int K, int N) {
  BERT_CHECK(M >= 0 && K > 0 && N > 0, Code::invalid_argument, op, ": bad shape M=", M, " K=", K, " N=", N);
}

void check_element_count(const char* op, int64_t n) {
  BERT_CHECK(n >= 0, Code::invalid_argument, op, ": bad element count ", n);
}

void check_rows_shape(const char* op, int64_t n, int H) {
  BERT_CHECK(n >= 0 && H > 0, Code::invalid_argument, op, ": bad shape rows=", n, " H=", H);
}

// Parameter segments of the optimizer ops: offsets and sizes not negative.
void check_segments(const char* op, const std::vector<ParamSegment>& segs) {
  for (size_t s = 0; s < segs.size(); ++s) {
    BERT_CHECK(segs[s].offset >= 0 && segs[s].size >= 0, Code::invalid_argument, op, ": segment ", s, " has offset ",
               segs[s].offset, " and size ", segs[s].size);
  }
}

// Rejects probabilities outside [0, 1).
void check_dropout_site(const char* op, const DropoutSite& site) {
  BERT_CHECK(site.p >= 0.0f && site.p < 1.0f, Code::invalid_argument, op, ": dropout probability ", site.p,
             " (tensor id ", site.tensor_id, ") is outside [0, 1)");
}

// Heads, head size, a layout starting at 0 with non-decreasing offsets, and the dropout site.
void check_attention_args(const char* op, const AttentionLayout& layout, int heads, int head_dim,
                          const DropoutSite& site) {
  BERT_CHECK(heads > 0 && head_dim > 0, Code::invalid_argument, op, ": bad heads=", heads, " head_dim=", head_dim);
  BERT_CHECK(layout.num_seqs() >= 1 && layout.seq_start[0] == 0, Code::invalid_argument, op,
             ": layout needs seq_start = {0, ...} with at least one sequence");
  for (int b = 0; b < layout.num_seqs(); ++b) {
    BERT_CHECK(layout.seq_start[b + 1] >= layout.seq_start[b], Code::invalid_argument, op, ": seq_start[", b + 1,
               "] = ", layout.seq_start[b + 1], " is below seq_start[", b, "] = ", layout.seq_start[b]);
  }
  check_dropout_site(op, site);
}

}  // namespace

void Ops::embedding_fwd(float* out, const int32_t* word_ids, const int32_t* pos_ids, const int32_t* type_ids,
                        const float* word_emb, const float* pos_emb, const float* type_emb, int64_t T, int H) {
  check_rows_shape("embedding_fwd", T, H);
  embedding_fwd_impl(out, word_ids, pos_ids, type_ids, word_emb, pos_emb, type_emb, T, H);
}

void Ops::embedding_bwd(float* dword, float* dpos, float* dtype, const float* dout, const int32_t* word_ids,
                        const int32_t* pos_ids, const int32_t* type_ids, int64_t T, int H) {
  check_rows_shape("embedding_bwd", T, H);
  embedding_bwd_impl(dword, dpos, dtype, dout, word_ids, pos_ids, type_ids, T, H);
}

void Ops::linear_fwd(float* out, float* pre_act, const float* in, const float* W, const float* b, int64_t M, int K,
                     int N, Activation act) {
  check_linear_shape("linear_fwd", M, K, N);
  linear_fwd_impl(out, pre_act, in, W, b, M, K, N, act);
}

void Ops::linear_bwd(float* din, float* dW, float* db, const float* dout, const float* in, const float* W,
                     const float* pre_act, float* dpre_scratch, int64_t M, int K, int N, Activation act,
                     bool accumulate_din) {
  check_linear_shape("linear_bwd", M, K, N);
  BERT_CHECK(act == Activation::none || (pre_act != nullptr && dpre_scratch != nullptr), Code::invalid_argument,
             "linear_bwd: an activation needs pre_act and dpre_scratch");
  linear_bwd_impl(din, dW, db, dout, in, W, pre_act, dpre_scratch, M, K, N, act, accumulate_din);
}

void Ops::activation_fwd(float* out, const float* pre, int64_t n, Activation act) {
  check_element_count("activation_fwd", n);
  activation_fwd_impl(out, pre, n, act);
}

void Ops::layernorm_fwd(float* out, float* mean, float* rstd, const float* in, const float* gamma, const float* beta,
                        int64_t M, int N, float eps) {
  check_rows_shape("layernorm_fwd", M, N);
  layernorm_fwd_impl(out, mean, rstd, in, gamma, beta, M, N, eps);
}

void Ops::layernorm_bwd(float* din, float* dgamma, float* dbeta, const float* dout, const float* in,
                        const float* mean, const float* rstd, const float* gamma, int64_t M, int N) {
  check_rows_shape("layernorm_bwd", M, N);
  layernorm_bwd_impl(din, dgamma, dbeta, dout, in, mean, rstd, gamma, M, N);
}

void Ops::dropout_residual_fwd(float* out, const float* in, const float* residual, int64_t n,
                               const DropoutSite& site) {
  check_element_count("dropout_residual_fwd", n);
  check_dropout_site("dropout_residual_fwd", site);
  dropout_residual_fwd_impl(out, in, residual, n, site);
}

void Ops::dropout_bwd(float* din, const float* dout, int64_t n, const DropoutSite& site) {
  check_element_count("dropout_bwd", n);
  check_dropout_site("dropout_bwd", site);
  dropout_bwd_impl(din, dout, n, site);
}

void Ops::residual_layernorm_fwd(float* out, float* res, float* mean, float* rstd, const float* in,
                                 const float* residual, const float* gamma, const float* beta, int64_t M, int N,
                                 float eps, const DropoutSite& site) {
  check_rows_shape("residual_layernorm_fwd", M, N);
  BERT_CHECK(eps >= 0.0f, Code::invalid_argument, "residual_layernorm_fwd: eps ", eps, " is negative");
  check_dropout_site("residual_layernorm_fwd", site);
  residual_layernorm_fwd_impl(out, res, mean, rstd, in, residual, gamma, beta, M, N, eps, site);
}

void Ops::residual_layernorm_bwd(float* d_in, float* d_residual, float* dgamma, float* dbeta, const float* dout,
                                 const float* res, const float* mean, const float* rstd, const float* gamma,
                                 int64_t M, int N, const DropoutSite& site) {
  check_rows_shape("residual_layernorm_bwd", M, N);
  check_dropout_site("residual_layernorm_bwd", site);
  BERT_CHECK(M == 0 || (d_in != d_residual && d_in != dout), Code::invalid_argument,
             "residual_layernorm_bwd: d_in may not alias d_residual or dout");
  residual_layernorm_bwd_impl(d_in, d_residual, dgamma, dbeta, dout, res, mean, rstd, gamma, M, N, site);
}

void Ops::attention_fwd(float* ctx, float* probs, const float* qkv, const float* key_bias,
                        const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site) {
  check_attention_args("attention_fwd", layout, heads, head_dim, site);
  attention_fwd_impl(ctx, probs, qkv, key_bias, layout, heads, head_dim, site);
}

void Ops::attention_bwd(float* dqkv, const float* dctx, const float* qkv, const float* probs,
                        const AttentionLayout& layout, int heads, int head_dim, const DropoutSite& site) {
  check_attention_args("attention_bwd", layout, heads, head_dim, site);
  attention_bwd_impl(dqkv, dctx, qkv, probs, layout, heads, head_dim, site);
}

void Ops::gather_rows(float* out, const float* in, const int32_t* rows, int64_t n, int H) {
  check_rows_shape("gather_rows", n, H);
  gather_rows_impl(out, in, rows, n, H);
}

void Ops::scatter_add_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int H) {
  check_rows_shape("scatter_add_rows", n, H);
  scatter_add_rows_impl(dst, src, rows, n, H);
}

void Ops::softmax_xent(float* dlogits, float* losses, int32_t* correct, const float* logits, const int32_t* labels,
                       int64_t M, int V, int ld, float grad_scale) {
  BERT_CHECK(M >= 0 && V > 0 && ld >= V, Code::invalid_argument, "softmax_xent: bad shape M=", M, " V=", V, " ld=", ld);
  softmax_xent_impl(dlogits, losses, correct, logits, labels, M, V, ld, grad_scale);
}

void Ops::segment_sumsq(double* host_out, const float* x, const std::vector<ParamSegment>& segs) {
  check_segments("segment_sumsq", segs);
  segment_sumsq_impl(host_out, x, segs);
}

void Ops::adam_direction(float* update, float* m, float* v, const float* grad, const float* param,
                         const std::vector<ParamSegment>& segs, const AdamStepArgs& args, double* host_sumsq) {
  check_segments("adam_direction", segs);
  adam_direction_impl(update, m, v, grad, param, segs, args, host_sumsq);
}

void Ops::apply_update(float* param, const float* update, const std::vector<ParamSegment>& segs,
                       const std::vector<float>& host_scale) {
  check_segments("apply_update", segs);
  BERT_CHECK(host_scale.size() == segs.size(), Code::invalid_argument, "apply_update: ", host_scale.size(),
             " scales for ", segs.size(), " segments");
  apply_update_impl(param, update, segs, host_scale);
}

void Ops::scale(float* x, float a, int64_t n) {
  check_element_count("scale", n);
  scale_impl(x, a, n);
}

}  // namespace bert
