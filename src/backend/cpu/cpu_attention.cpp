// Multi-head self-attention on the CPU, one (sequence, head) pair per task, with small GEMMs
// inside each task (single-threaded inside the parallel region, so every task computes the
// same bits whichever thread runs it). Probabilities are saved pre-dropout;
// the dropout element index is the probability's index in the saved probs array.
// With bf16 GEMM inputs the products take bf16 copies of both operands, as the dense layers do
// (Q, K, V and the context gradient converted once per call, probabilities and score gradients
// per task); softmax and everything saved stay fp32. On one thread of an AMD EPYC (Zen 4) oneDNN's
// bf16 GEMM runs bert-base's per-head products 1.8-1.9x as fast as its sgemm (128-512 tokens).
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/attention_shape.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_lane_reduce.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_philox.h"
#include "backend/cpu/cpu_vector_math.h"
#include "core/error.h"

namespace bert {
namespace {

// row[c] = softmax_c(row[c] · scale + key_bias[c]) in place; the sum in double.
BERT_CPU_CLONES
void softmax_row_fwd(float* row, const float* key_bias, int64_t L, float scale) {
  for (int64_t c = 0; c < L; ++c) row[c] = row[c] * scale + key_bias[c];
  const float row_max = lane_max(row, L);
  for (int64_t c = 0; c < L; ++c) row[c] -= row_max;
  vector_exp(row, row, L);
  const double inv = 1.0 / lane_sum(L, [&](int64_t c) { return static_cast<double>(row[c]); });
  for (int64_t c = 0; c < L; ++c) row[c] = static_cast<float>(row[c] * inv);
}

// Softmax backward of one row in place: dS = P ⊙ (dP - Σ_k dP ⊙ P) · scale (the dot in double).
BERT_CPU_CLONES
void softmax_row_bwd(float* grad, const float* prob, int64_t L, float scale) {
  const float rowdot = static_cast<float>(lane_sum(L, [&](int64_t c) { return static_cast<double>(grad[c]) * prob[c]; }));
  for (int64_t c = 0; c < L; ++c) grad[c] = prob[c] * (grad[c] - rowdot) * scale;
}

// C[M,N] = op(A)·op(B) on the calling thread: in fp32, or from bf16 operands a16 and b16 (stored
// as A and B are) when they are not null.
void task_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<float> A, const uint16_t* a16, GemmOperand<float> B,
               const uint16_t* b16, float* C, int64_t ldc) {
  if (a16 == nullptr) return cpu_gemm(M, N, K, 1.0f, A, B, 0.0f, C, ldc, 1);
  cpu_gemm_bf16(M, N, K, 1.0f, {a16, A.ld, A.transposed}, {b16, B.ld, B.transposed}, 0.0f, C, ldc, 1);
}

}  // namespace

const uint16_t* CpuOps::attention_bf16_copy(const float* x, int64_t rows, int64_t cols, std::vector<uint16_t>& copy) {
  return bf16_gemm_inputs_ ? bf16_operand({x, cols, false}, rows, cols, copy).data : nullptr;
}

uint16_t* CpuOps::attention_scratch16(size_t per_thread) {
  if (!bf16_gemm_inputs_) return nullptr;
  const size_t needed = per_thread * static_cast<size_t>(threads_);
  if (attention_scratch16_.size() < needed) attention_scratch16_.resize(needed);
  return attention_scratch16_.data();
}

float* CpuOps::attention_scratch(size_t floats_per_thread) {
  const size_t needed = floats_per_thread * static_cast<size_t>(threads_);
  if (attention_scratch_.size() < needed) attention_scratch_.resize(needed);
  return attention_scratch_.data();
}

void CpuOps::compute_probs_offsets(const AttentionLayout& layout, int heads) {
  const int seqs = layout.num_seqs();
  seq_probs_offset_.resize(static_cast<size_t>(seqs) + 1);
  int64_t total = 0;
  for (int b = 0; b < seqs; ++b) {
    seq_probs_offset_[b] = total;
    const int64_t len = layout.seq_start[b + 1] - layout.seq_start[b];
    total += static_cast<int64_t>(heads) * len * len;
  }
  seq_probs_offset_[seqs] = total;
}

void CpuOps::attention_fwd_impl(const AttentionFwdArgs& a) {
  float* ctx = a.ctx.f32();
  float* probs = a.probs.f32();
  const float* qkv = a.qkv.f32();
  const AttentionShape shape(a.heads, a.head_dim, a.site);
  const int64_t H = shape.H, ld_qkv = shape.ld_qkv, max_len = a.layout.max_len();
  const bool dropout = a.site.p > 0.0f;
  const float score_scale = shape.scale;
  compute_probs_offsets(a.layout, a.heads);
  const size_t square = static_cast<size_t>(max_len * max_len);
  float* scratch = dropout ? attention_scratch(square) : nullptr;
  const uint16_t* qkv16 = attention_bf16_copy(qkv, a.layout.total_tokens(), ld_qkv, attention_a16_);
  uint16_t* scratch16 = attention_scratch16(square);
  const int64_t tasks = static_cast<int64_t>(a.layout.num_seqs()) * a.heads;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
  for (int64_t task = 0; task < tasks; ++task) {
    const int b = static_cast<int>(task / a.heads), h = static_cast<int>(task % a.heads);
    const int64_t s0 = a.layout.seq_start[b], L = a.layout.seq_start[b + 1] - s0;
    if (L == 0) continue;
    const int64_t q_off = s0 * ld_qkv + static_cast<int64_t>(h) * a.head_dim;
    const float* q = qkv + q_off;  // [L, D], row stride ld_qkv
    const float* k = q + H;
    const float* v = q + 2 * H;
    const uint16_t* q16 = qkv16 == nullptr ? nullptr : qkv16 + q_off;  // likewise, in bf16
    const int64_t p_off = seq_probs_offset_[b] + h * L * L;
    float* P = probs + p_off;  // [L, L]
    task_gemm(L, L, a.head_dim, {q, ld_qkv, false}, q16, {k, ld_qkv, true}, q16 == nullptr ? nullptr : q16 + H, P, L);
    for (int64_t r = 0; r < L; ++r) softmax_row_fwd(P + r * L, a.key_bias + s0, L, score_scale);
    float* out = ctx + s0 * H + static_cast<int64_t>(h) * a.head_dim;  // [L, D], row stride H
    const float* weights = P;  // the probabilities the values are weighted by: after dropout
    if (dropout) {
      float* dropped = scratch + omp_get_thread_num() * square;
      dropout_apply(dropped, P, nullptr, a.site, p_off, L * L);
      weights = dropped;
    }
    uint16_t* weights16 = q16 == nullptr ? nullptr : scratch16 + omp_get_thread_num() * square;
    if (weights16 != nullptr) floats_to_bf16(weights16, weights, L * L);
    task_gemm(L, a.head_dim, L, {weights, L, false}, weights16, {v, ld_qkv, false},
              q16 == nullptr ? nullptr : q16 + 2 * H, out, H);
  }
}

void CpuOps::attention_bwd_impl(const AttentionBwdArgs& a) {
  float* dqkv = a.dqkv.f32();
  const float* dctx = a.dctx.f32();
  const float* qkv = a.qkv.f32();
  const float* probs = a.probs.f32();
  const AttentionShape shape(a.heads, a.head_dim, a.site);
  const int64_t H = shape.H, ld_qkv = shape.ld_qkv, max_len = a.layout.max_len();
  const bool dropout = a.site.p > 0.0f;
  const float score_scale = shape.scale;
  compute_probs_offsets(a.layout, a.heads);
  const size_t square = static_cast<size_t>(max_len * max_len);
  const size_t per_thread = square * (dropout ? 2 : 1);
  float* scratch = attention_scratch(per_thread);
  const int64_t T = a.layout.total_tokens();
  const uint16_t* qkv16 = attention_bf16_copy(qkv, T, ld_qkv, attention_a16_);
  const uint16_t* dctx16 = attention_bf16_copy(dctx, T, H, attention_b16_);
  uint16_t* scratch16 = attention_scratch16(square);
  const int64_t tasks = static_cast<int64_t>(a.layout.num_seqs()) * a.heads;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
  for (int64_t task = 0; task < tasks; ++task) {
    const int b = static_cast<int>(task / a.heads), h = static_cast<int>(task % a.heads);
    const int64_t s0 = a.layout.seq_start[b], L = a.layout.seq_start[b + 1] - s0;
    if (L == 0) continue;
    const int64_t col = static_cast<int64_t>(h) * a.head_dim;
    // [L, D] blocks with row stride ld_qkv (q, k, v and their gradients) or H (dout); with bf16
    // GEMM inputs q16 and dout16 are q's and dout's bf16 copies.
    const float* q = qkv + s0 * ld_qkv + col;
    const float* k = q + H;
    const float* v = q + 2 * H;
    float* dq = dqkv + s0 * ld_qkv + col;
    float* dk = dq + H;
    float* dv = dq + 2 * H;
    const float* dout = dctx + s0 * H + col;
    const bool half = qkv16 != nullptr;
    const uint16_t* q16 = half ? qkv16 + s0 * ld_qkv + col : nullptr;
    const uint16_t* dout16 = half ? dctx16 + s0 * H + col : nullptr;
    uint16_t* square16 = half ? scratch16 + omp_get_thread_num() * square : nullptr;  // [L, L] in bf16
    const int64_t p_off = seq_probs_offset_[b] + h * L * L;
    const float* P = probs + p_off;  // [L, L]
    float* dP = scratch + static_cast<size_t>(omp_get_thread_num()) * per_thread;  // [L, L]
    // Gradient w.r.t. the probabilities after dropout, then through the dropout mask.
    task_gemm(L, L, a.head_dim, {dout, H, false}, dout16, {v, ld_qkv, true}, half ? q16 + 2 * H : nullptr, dP, L);
    const float* weights = P;  // the probabilities the values were weighted by: after dropout
    if (dropout) {
      float* dropped = dP + square;  // [L, L] = dropout(P)
      dropout_apply_pair(dropped, P, dP, dP, a.site, p_off, L * L);
      weights = dropped;
    }
    if (half) floats_to_bf16(square16, weights, L * L);
    task_gemm(L, a.head_dim, L, {weights, L, true}, square16, {dout, H, false}, dout16, dv, ld_qkv);
    // Softmax backward: dS = P ⊙ (dP - Σ_k dP ⊙ P), then the 1/sqrt(D) score scale.
    for (int64_t r = 0; r < L; ++r) softmax_row_bwd(dP + r * L, P + r * L, L, score_scale);
    if (half) floats_to_bf16(square16, dP, L * L);
    task_gemm(L, a.head_dim, L, {dP, L, false}, square16, {k, ld_qkv, false}, half ? q16 + H : nullptr, dq, ld_qkv);
    task_gemm(L, a.head_dim, L, {dP, L, true}, square16, {q, ld_qkv, false}, q16, dk, ld_qkv);
  }
}

}  // namespace bert
