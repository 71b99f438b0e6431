// The reference attention's launch plan on the GPU: how a batch's GEMMs are
// batched, and the GEMMs, each written once. CUDA-free, so that CudaOps
// (cuda_attention.cpp) and the cost model (src/perf/cost_model_ops.cpp) make the same choice and
// describe the same GEMMs.
#pragma once

#include <cstdint>

#include "backend/attention_shape.h"
#include "backend/cuda/gemm_args.h"
#include "backend/ops.h"

namespace bert {

// Where the first (sequence, head) operand of one batched attention GEMM starts — in elements
// of [T, 3H] Q/K/V (and their gradient), of [T, H] context (and its gradient), of the
// probabilities (and their scratch copies) — and the stride from one batch entry to the next.
struct AttentionBatch {
  int64_t L = 0;  // the sequence length
  int batch = 0;
  int64_t qkv_at = 0, ctx_at = 0, probs_at = 0;
  int64_t qkv_stride = 0, ctx_stride = 0, probs_stride = 0;
};

// Sequence b of a batch (first token s0, L tokens, probabilities at probs_offset(b)), over the heads.
inline AttentionBatch sequence_batch(const AttentionShape& a, int64_t s0, int64_t L, int64_t probs_at) {
  return {.L = L, .batch = a.heads, .qkv_at = s0 * a.ld_qkv, .ctx_at = s0 * a.H, .probs_at = probs_at,
          .qkv_stride = a.head_dim, .ctx_stride = a.head_dim, .probs_stride = L * L};
}

// Head h of a padded batch of `seqs` sequences of L tokens, over the sequences.
inline AttentionBatch head_batch(const AttentionShape& a, int h, int seqs, int64_t L) {
  return {.L = L, .batch = seqs, .qkv_at = static_cast<int64_t>(h) * a.head_dim,
          .ctx_at = static_cast<int64_t>(h) * a.head_dim, .probs_at = h * L * L, .qkv_stride = L * a.ld_qkv,
          .ctx_stride = L * a.H, .probs_stride = a.heads * L * L};
}

// Calls f(batch) for each GEMM batch of the layout, in order: padded batches of more sequences
// than heads run as GEMMs batched over the sequences, one per head; other batches as GEMMs
// batched over the heads, one per non-empty sequence.
template <typename F>
void for_each_gemm_batch(const AttentionShape& a, const AttentionLayout& layout, F&& f) {
  if (const int64_t L = layout.uniform_length(); L > 0 && layout.num_seqs() > a.heads) {
    for (int h = 0; h < a.heads; ++h) f(head_batch(a, h, layout.num_seqs(), L));
    return;
  }
  int64_t probs_at = 0;  // probs_offset of sequence b
  for (int b = 0; b < layout.num_seqs(); ++b) {
    const int64_t s0 = layout.seq_start[b], L = layout.seq_start[b + 1] - s0;
    if (L > 0) f(sequence_batch(a, s0, L, probs_at));
    probs_at += a.heads * L * L;
  }
}

// P = Q · K^T.
inline GemmArgs attention_scores_gemm(const AttentionShape& a, const AttentionBatch& x, ConstAct qkv, Act probs) {
  return {.trans_b = true, .m = x.L, .n = x.L, .k = a.head_dim, .A = qkv + x.qkv_at, .lda = a.ld_qkv,
          .stride_a = x.qkv_stride, .B = qkv + x.qkv_at + a.H, .ldb = a.ld_qkv, .stride_b = x.qkv_stride,
          .C = probs + x.probs_at, .ldc = x.L, .stride_c = x.probs_stride, .batch = x.batch};
}

// ctx = dropout(P) · V.
inline GemmArgs attention_context_gemm(const AttentionShape& a, const AttentionBatch& x, ConstAct p, ConstAct qkv,
                                       Act ctx) {
  return {.m = x.L, .n = a.head_dim, .k = x.L, .A = p + x.probs_at, .lda = x.L, .stride_a = x.probs_stride,
          .B = qkv + x.qkv_at + 2 * a.H, .ldb = a.ld_qkv, .stride_b = x.qkv_stride, .C = ctx + x.ctx_at,
          .ldc = a.H, .stride_c = x.ctx_stride, .batch = x.batch};
}

// dV = dropout(P)^T · dctx.
inline GemmArgs attention_value_grad_gemm(const AttentionShape& a, const AttentionBatch& x, ConstAct p,
                                          ConstAct dctx, Act dqkv) {
  return {.trans_a = true, .m = x.L, .n = a.head_dim, .k = x.L, .A = p + x.probs_at, .lda = x.L,
          .stride_a = x.probs_stride, .B = dctx + x.ctx_at, .ldb = a.H, .stride_b = x.ctx_stride,
          .C = dqkv + x.qkv_at + 2 * a.H, .ldc = a.ld_qkv, .stride_c = x.qkv_stride, .batch = x.batch};
}

// d(dropout(P)) = dctx · V^T.
inline GemmArgs attention_probs_grad_gemm(const AttentionShape& a, const AttentionBatch& x, ConstAct dctx,
                                          ConstAct qkv, Act dgrad) {
  return {.trans_b = true, .m = x.L, .n = x.L, .k = a.head_dim, .A = dctx + x.ctx_at, .lda = a.H,
          .stride_a = x.ctx_stride, .B = qkv + x.qkv_at + 2 * a.H, .ldb = a.ld_qkv, .stride_b = x.qkv_stride,
          .C = dgrad + x.probs_at, .ldc = x.L, .stride_c = x.probs_stride, .batch = x.batch};
}

// dQ = dS · K.
inline GemmArgs attention_query_grad_gemm(const AttentionShape& a, const AttentionBatch& x, ConstAct dgrad,
                                          ConstAct qkv, Act dqkv) {
  return {.m = x.L, .n = a.head_dim, .k = x.L, .A = dgrad + x.probs_at, .lda = x.L, .stride_a = x.probs_stride,
          .B = qkv + x.qkv_at + a.H, .ldb = a.ld_qkv, .stride_b = x.qkv_stride, .C = dqkv + x.qkv_at,
          .ldc = a.ld_qkv, .stride_c = x.qkv_stride, .batch = x.batch};
}

// dK = dS^T · Q.
inline GemmArgs attention_key_grad_gemm(const AttentionShape& a, const AttentionBatch& x, ConstAct dgrad,
                                        ConstAct qkv, Act dqkv) {
  GemmArgs g = attention_query_grad_gemm(a, x, dgrad, qkv, dqkv);
  g.trans_a = true;
  g.B = qkv + x.qkv_at;
  g.C = dqkv + x.qkv_at + a.H;
  return g;
}

}  // namespace bert
