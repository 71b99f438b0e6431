// Multi-head self-attention on the CPU, one (sequence, head) pair per task, with small GEMMs
// inside each task (single-threaded inside the parallel region, so every task computes the
// same bits whichever thread runs it). Probabilities are saved pre-dropout;
// the dropout element index is the probability's index in the saved probs array.
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

}  // namespace

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
  float* scratch = dropout ? attention_scratch(static_cast<size_t>(max_len * max_len)) : nullptr;
  const int64_t tasks = static_cast<int64_t>(a.layout.num_seqs()) * a.heads;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
  for (int64_t task = 0; task < tasks; ++task) {
    const int b = static_cast<int>(task / a.heads), h = static_cast<int>(task % a.heads);
    const int64_t s0 = a.layout.seq_start[b], L = a.layout.seq_start[b + 1] - s0;
    if (L == 0) continue;
    const float* q = qkv + s0 * ld_qkv + static_cast<int64_t>(h) * a.head_dim;  // [L, D], row stride ld_qkv
    const float* k = q + H;
    const float* v = q + 2 * H;
    const int64_t p_off = seq_probs_offset_[b] + h * L * L;
    float* P = probs + p_off;  // [L, L]
    cpu_gemm(L, L, a.head_dim, 1.0f, {q, ld_qkv, false}, {k, ld_qkv, true}, 0.0f, P, L, 1);
    for (int64_t r = 0; r < L; ++r) softmax_row_fwd(P + r * L, a.key_bias + s0, L, score_scale);
    float* out = ctx + s0 * H + static_cast<int64_t>(h) * a.head_dim;  // [L, D], row stride H
    if (!dropout) {
      cpu_gemm(L, a.head_dim, L, 1.0f, {P, L, false}, {v, ld_qkv, false}, 0.0f, out, H, 1);
      continue;
    }
    float* dropped = scratch + static_cast<size_t>(omp_get_thread_num()) * max_len * max_len;
    dropout_apply(dropped, P, nullptr, a.site, p_off, L * L);
    cpu_gemm(L, a.head_dim, L, 1.0f, {dropped, L, false}, {v, ld_qkv, false}, 0.0f, out, H, 1);
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
  const size_t per_thread = static_cast<size_t>(max_len * max_len) * (dropout ? 2 : 1);
  float* scratch = attention_scratch(per_thread);
  const int64_t tasks = static_cast<int64_t>(a.layout.num_seqs()) * a.heads;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
  for (int64_t task = 0; task < tasks; ++task) {
    const int b = static_cast<int>(task / a.heads), h = static_cast<int>(task % a.heads);
    const int64_t s0 = a.layout.seq_start[b], L = a.layout.seq_start[b + 1] - s0;
    if (L == 0) continue;
    const int64_t col = static_cast<int64_t>(h) * a.head_dim;
    // [L, D] blocks with row stride ld_qkv (q, k, v and their gradients) or H (dout).
    const float* q = qkv + s0 * ld_qkv + col;
    const float* k = q + H;
    const float* v = q + 2 * H;
    float* dq = dqkv + s0 * ld_qkv + col;
    float* dk = dq + H;
    float* dv = dq + 2 * H;
    const float* dout = dctx + s0 * H + col;
    const int64_t p_off = seq_probs_offset_[b] + h * L * L;
    const float* P = probs + p_off;  // [L, L]
    float* dP = scratch + static_cast<size_t>(omp_get_thread_num()) * per_thread;  // [L, L]
    // Gradient w.r.t. the probabilities after dropout, then through the dropout mask.
    cpu_gemm(L, L, a.head_dim, 1.0f, {dout, H, false}, {v, ld_qkv, true}, 0.0f, dP, L, 1);
    if (dropout) {
      float* dropped = dP + max_len * max_len;  // [L, L] = dropout(P)
      dropout_apply_pair(dropped, P, dP, dP, a.site, p_off, L * L);
      cpu_gemm(L, a.head_dim, L, 1.0f, {dropped, L, true}, {dout, H, false}, 0.0f, dv, ld_qkv, 1);
    } else {
      cpu_gemm(L, a.head_dim, L, 1.0f, {P, L, true}, {dout, H, false}, 0.0f, dv, ld_qkv, 1);
    }
    // Softmax backward: dS = P ⊙ (dP - Σ_k dP ⊙ P), then the 1/sqrt(D) score scale.
    for (int64_t r = 0; r < L; ++r) softmax_row_bwd(dP + r * L, P + r * L, L, score_scale);
    cpu_gemm(L, a.head_dim, L, 1.0f, {dP, L, false}, {k, ld_qkv, false}, 0.0f, dq, ld_qkv, 1);
    cpu_gemm(L, a.head_dim, L, 1.0f, {dP, L, true}, {q, ld_qkv, false}, 0.0f, dk, ld_qkv, 1);
  }
}

}  // namespace bert
