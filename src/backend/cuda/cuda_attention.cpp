// Reference attention on the GPU for padded and variable-length (packed) batches: per sequence,
// head-batched strided cuBLASLt GEMMs (scores = Q·K^T, ctx = dropout(P)·V and their backward)
// around the fused scale+mask+softmax(+dropout) kernels, which run once per call over every
// sequence. Scores are written straight into the saved probs array, and dropped P and dS are
// laid out like it (in the activation type), so the dropout element index is the index there, as
// on the CPU. With 16-bit activations the GEMMs read and write them directly; with fp32 ones in
// bf16/fp16 the GEMMs read Q, K, V, dctx, dropped P and dS from 16-bit copies staged once per
// call (LtGemm::stage) rather than casting their slices for every sequence and GEMM. With
// fused attention both directions go to FusedAttention (cuDNN) instead, for every layout.
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "kernels/attention_softmax.h"
#include "kernels/dropout.h"

namespace bert {
namespace {

// Gives the GEMM operands staged during an attention call back when it ends (also by an
// exception), keeping those staged before it.
class StagedOperands {
 public:
  explicit StagedOperands(LtGemm& gemm) : gemm_(gemm), keep_(gemm.staged_count()) {}
  ~StagedOperands() { gemm_.unstage_to(keep_); }
  StagedOperands(const StagedOperands&) = delete;
  StagedOperands& operator=(const StagedOperands&) = delete;

 private:
  LtGemm& gemm_;
  int keep_;
};

}  // namespace

void CudaOps::attention_fwd_impl(Act ctx, Act probs, ConstAct qkv, const float* key_bias,
                                 const AttentionLayout& layout, int heads, int head_dim,
                                 const DropoutSite& site) {
  if (fused_ != nullptr) {
    fused_->forward(ctx, fused_stats(probs), qkv, key_bias, layout, heads, head_dim, site);
    return;
  }
  if (const int64_t L = layout.uniform_length(); L > 0 && layout.num_seqs() > heads) {
    attention_fwd_by_head(ctx, probs, qkv, key_bias, layout.num_seqs(), L, heads, head_dim, site);
    return;
  }
  const int64_t H = static_cast<int64_t>(heads) * head_dim;
  const int64_t ld_qkv = 3 * H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float keep_scale = 1.0f / (1.0f - site.p);
  const kernels::SoftmaxSequences seqs = softmax_sequences(layout, heads);
  const int64_t elems = layout.probs_elems(heads);
  const Act dropped = site.p != 0.0f ? scratch_act(*attn_a_, elems) : Act();  // laid out as probs
  const StagedOperands staged(*gemm_);
  gemm_->stage(qkv, layout.total_tokens() * ld_qkv);  // Q, K, V cast to 16 bits once, not per GEMM
  int64_t offset = 0;  // probs_offset of sequence b
  for (int b = 0; b < layout.num_seqs(); ++b) {
    const int64_t s0 = layout.seq_start[b];
    const int64_t L = layout.seq_start[b + 1] - s0;
    if (L == 0) continue;
    const ConstAct q = qkv + s0 * ld_qkv;  // [L, 3H]
    GemmArgs scores;                     // P_h = Q_h [L, D] · K_h[L, D]^T, into probs
    scores.trans_b = true;
    scores.m = L;
    scores.n = L;
    scores.k = head_dim;
    scores.A = q;
    scores.lda = ld_qkv;
    scores.stride_a = head_dim;
    scores.B = q + H;
    scores.ldb = ld_qkv;
    scores.stride_b = head_dim;
    scores.C = probs + offset;
    scores.ldc = L;
    scores.stride_c = L * L;
    scores.batch = heads;
    gemm_->run(scores);
    offset += static_cast<int64_t>(heads) * L * L;
  }
  kernels::attention_softmax_fwd(probs, dropped, key_bias, seqs, heads, scale, site, keep_scale, stream_);
  const ConstAct p = dropped.data != nullptr ? ConstAct(dropped) : probs;
  gemm_->stage(p, elems);
  offset = 0;
  for (int b = 0; b < layout.num_seqs(); ++b) {
    const int64_t s0 = layout.seq_start[b];
    const int64_t L = layout.seq_start[b + 1] - s0;
    if (L == 0) continue;
    GemmArgs pv;  // ctx_h [L, D] = dropout(P_h) [L, L] · V_h [L, D]
    pv.m = L;
    pv.n = head_dim;
    pv.k = L;
    pv.A = p + offset;
    pv.lda = L;
    pv.stride_a = L * L;
    pv.B = qkv + s0 * ld_qkv + 2 * H;
    pv.ldb = ld_qkv;
    pv.stride_b = head_dim;
    pv.C = ctx + s0 * H;
    pv.ldc = H;
    pv.stride_c = head_dim;
    pv.batch = heads;
    gemm_->run(pv);
    offset += static_cast<int64_t>(heads) * L * L;
  }
}

void CudaOps::attention_bwd_impl(Act dqkv, ConstAct dctx, ConstAct ctx, ConstAct qkv, ConstAct probs,
                                 const AttentionLayout& layout, int heads, int head_dim,
                                 const DropoutSite& site) {
  if (fused_ != nullptr) {
    fused_->backward(dqkv, dctx, ctx, qkv, fused_stats(probs), layout, heads, head_dim, site);
    return;
  }
  if (const int64_t L = layout.uniform_length(); L > 0 && layout.num_seqs() > heads) {
    attention_bwd_by_head(dqkv, dctx, qkv, probs, layout.num_seqs(), L, heads, head_dim, site);
    return;
  }
  const int64_t H = static_cast<int64_t>(heads) * head_dim;
  const int64_t ld_qkv = 3 * H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float keep_scale = 1.0f / (1.0f - site.p);
  const kernels::SoftmaxSequences seqs = softmax_sequences(layout, heads);
  const int64_t elems = layout.probs_elems(heads);
  const Act dropped = site.p != 0.0f ? scratch_act(*attn_a_, elems) : Act();  // laid out as probs
  const Act dgrad = scratch_act(*attn_b_, elems);                                // likewise
  // The dropout index of an element is its index in probs, for all sequences at once.
  if (dropped.data != nullptr) kernels::dropout_residual_fwd(dropped, probs, nullptr, elems, site, keep_scale, 0, stream_);
  const ConstAct p = dropped.data != nullptr ? ConstAct(dropped) : probs;
  const StagedOperands staged(*gemm_);
  gemm_->stage(qkv, layout.total_tokens() * ld_qkv);  // cast to 16 bits once, not per GEMM
  gemm_->stage(dctx, layout.total_tokens() * H);
  gemm_->stage(p, elems);
  int64_t offset = 0;
  for (int b = 0; b < layout.num_seqs(); ++b) {
    const int64_t s0 = layout.seq_start[b];
    const int64_t L = layout.seq_start[b + 1] - s0;
    if (L == 0) continue;
    const ConstAct q = qkv + s0 * ld_qkv;  // [L, 3H]
    const ConstAct dc = dctx + s0 * H;     // [L, H]
    GemmArgs dv;  // dV_h [L, D] = dropout(P_h)^T · dctx_h
    dv.trans_a = true;
    dv.m = L;
    dv.n = head_dim;
    dv.k = L;
    dv.A = p + offset;
    dv.lda = L;
    dv.stride_a = L * L;
    dv.B = dc;
    dv.ldb = H;
    dv.stride_b = head_dim;
    dv.C = dqkv + s0 * ld_qkv + 2 * H;
    dv.ldc = ld_qkv;
    dv.stride_c = head_dim;
    dv.batch = heads;
    gemm_->run(dv);
    GemmArgs dp;  // d(dropout(P_h)) [L, L] = dctx_h · V_h^T
    dp.trans_b = true;
    dp.m = L;
    dp.n = L;
    dp.k = head_dim;
    dp.A = dc;
    dp.lda = H;
    dp.stride_a = head_dim;
    dp.B = q + 2 * H;
    dp.ldb = ld_qkv;
    dp.stride_b = head_dim;
    dp.C = dgrad + offset;
    dp.ldc = L;
    dp.stride_c = L * L;
    dp.batch = heads;
    gemm_->run(dp);
    offset += static_cast<int64_t>(heads) * L * L;
  }
  kernels::attention_softmax_bwd(dgrad, probs, seqs, heads, scale, site, keep_scale, stream_);
  gemm_->stage(dgrad, elems);  // dS feeds two GEMMs: cast once
  offset = 0;
  for (int b = 0; b < layout.num_seqs(); ++b) {
    const int64_t s0 = layout.seq_start[b];
    const int64_t L = layout.seq_start[b + 1] - s0;
    if (L == 0) continue;
    const ConstAct q = qkv + s0 * ld_qkv;  // [L, 3H]
    const Act dq = dqkv + s0 * ld_qkv;      // [L, 3H]
    GemmArgs dqg;  // dQ_h [L, D] = dS_h [L, L] · K_h [L, D]
    dqg.m = L;
    dqg.n = head_dim;
    dqg.k = L;
    dqg.A = dgrad + offset;
    dqg.lda = L;
    dqg.stride_a = L * L;
    dqg.B = q + H;
    dqg.ldb = ld_qkv;
    dqg.stride_b = head_dim;
    dqg.C = dq;
    dqg.ldc = ld_qkv;
    dqg.stride_c = head_dim;
    dqg.batch = heads;
    gemm_->run(dqg);
    GemmArgs dk = dqg;  // dK_h [L, D] = dS_h^T · Q_h
    dk.trans_a = true;
    dk.B = q;
    dk.C = dq + H;
    gemm_->run(dk);
    offset += static_cast<int64_t>(heads) * L * L;
  }
}

kernels::SoftmaxSequences CudaOps::softmax_sequences(const AttentionLayout& layout, int heads) {
  if (const int64_t L = layout.uniform_length(); L > 0)
    return kernels::SoftmaxSequences{nullptr, layout.num_seqs(), static_cast<int>(L)};
  const int n = layout.num_seqs();
  std::vector<int64_t> words(layout.seq_start.begin(), layout.seq_start.end());  // token starts
  for (int b = 0; b < n; ++b) words.push_back(layout.probs_offset(b, heads));
  const size_t bytes = words.size() * sizeof(int64_t);
  // A buffer that grows (a new pointer) only ever does so for a longer table than the last,
  // which differs from host_seqs_ and so is uploaded.
  auto* device = seqs_table_->get_as<int64_t>(words.size());
  if (words != host_seqs_) {
    // Pageable source: staged before cudaMemcpyAsync returns; the stream orders it after the
    // kernels that read the previous table.
    CUDA_CHECK(cudaMemcpyAsync(device, words.data(), bytes, cudaMemcpyHostToDevice, stream_));
    host_seqs_ = std::move(words);
  }
  return kernels::SoftmaxSequences{device, n, layout.max_len()};
}

// Padded batches: sequence b's block of probs starts at b·heads·L² (its probs_offset), and for a
// fixed head every operand advances by a constant stride from one sequence to the next, so each
// GEMM runs once per head, batched over the sequences.
void CudaOps::attention_fwd_by_head(Act ctx, Act probs, ConstAct qkv, const float* key_bias, int seqs,
                                    int64_t L, int heads, int head_dim, const DropoutSite& site) {
  const int64_t H = static_cast<int64_t>(heads) * head_dim, ld_qkv = 3 * H;
  const int64_t block = heads * L * L;  // one sequence's probabilities
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float keep_scale = 1.0f / (1.0f - site.p);
  const Act dropped = site.p != 0.0f ? scratch_act(*attn_a_, seqs * block) : Act();
  const StagedOperands staged(*gemm_);
  gemm_->stage(qkv, seqs * L * ld_qkv);
  for (int h = 0; h < heads; ++h) {
    GemmArgs scores;  // P[b, h] = Q[b, h] · K[b, h]^T for every sequence b
    scores.trans_b = true;
    scores.m = L;
    scores.n = L;
    scores.k = head_dim;
    scores.A = qkv + h * head_dim;
    scores.lda = ld_qkv;
    scores.stride_a = L * ld_qkv;
    scores.B = qkv + H + h * head_dim;
    scores.ldb = ld_qkv;
    scores.stride_b = L * ld_qkv;
    scores.C = probs + h * L * L;
    scores.ldc = L;
    scores.stride_c = block;
    scores.batch = seqs;
    gemm_->run(scores);
  }
  const kernels::SoftmaxSequences padded{nullptr, seqs, static_cast<int>(L)};
  kernels::attention_softmax_fwd(probs, dropped, key_bias, padded, heads, scale, site, keep_scale, stream_);
  const ConstAct p = dropped.data != nullptr ? ConstAct(dropped) : probs;
  gemm_->stage(p, seqs * block);
  for (int h = 0; h < heads; ++h) {
    GemmArgs pv;  // ctx[b, h] = dropout(P[b, h]) · V[b, h]
    pv.m = L;
    pv.n = head_dim;
    pv.k = L;
    pv.A = p + h * L * L;
    pv.lda = L;
    pv.stride_a = block;
    pv.B = qkv + 2 * H + h * head_dim;
    pv.ldb = ld_qkv;
    pv.stride_b = L * ld_qkv;
    pv.C = ctx + h * head_dim;
    pv.ldc = H;
    pv.stride_c = L * H;
    pv.batch = seqs;
    gemm_->run(pv);
  }
}

void CudaOps::attention_bwd_by_head(Act dqkv, ConstAct dctx, ConstAct qkv, ConstAct probs, int seqs,
                                    int64_t L, int heads, int head_dim, const DropoutSite& site) {
  const int64_t H = static_cast<int64_t>(heads) * head_dim, ld_qkv = 3 * H;
  const int64_t block = heads * L * L;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float keep_scale = 1.0f / (1.0f - site.p);
  const size_t all = static_cast<size_t>(seqs) * block;
  const Act dropped = site.p != 0.0f ? scratch_act(*attn_a_, all) : Act();
  const Act dgrad = scratch_act(*attn_b_, all);
  // The dropout index of an element is its index in probs, for all sequences at once.
  if (dropped.data != nullptr) kernels::dropout_residual_fwd(dropped, probs, nullptr, seqs * block, site, keep_scale, 0, stream_);
  const ConstAct p = dropped.data != nullptr ? ConstAct(dropped) : probs;
  const StagedOperands staged(*gemm_);
  gemm_->stage(qkv, seqs * L * ld_qkv);
  gemm_->stage(dctx, seqs * L * H);
  gemm_->stage(p, seqs * block);
  for (int h = 0; h < heads; ++h) {
    GemmArgs dv;  // dV[b, h] = dropout(P[b, h])^T · dctx[b, h]
    dv.trans_a = true;
    dv.m = L;
    dv.n = head_dim;
    dv.k = L;
    dv.A = p + h * L * L;
    dv.lda = L;
    dv.stride_a = block;
    dv.B = dctx + h * head_dim;
    dv.ldb = H;
    dv.stride_b = L * H;
    dv.C = dqkv + 2 * H + h * head_dim;
    dv.ldc = ld_qkv;
    dv.stride_c = L * ld_qkv;
    dv.batch = seqs;
    gemm_->run(dv);
    GemmArgs dp;  // d(dropout(P[b, h])) = dctx[b, h] · V[b, h]^T
    dp.trans_b = true;
    dp.m = L;
    dp.n = L;
    dp.k = head_dim;
    dp.A = dctx + h * head_dim;
    dp.lda = H;
    dp.stride_a = L * H;
    dp.B = qkv + 2 * H + h * head_dim;
    dp.ldb = ld_qkv;
    dp.stride_b = L * ld_qkv;
    dp.C = dgrad + h * L * L;
    dp.ldc = L;
    dp.stride_c = block;
    dp.batch = seqs;
    gemm_->run(dp);
  }
  const kernels::SoftmaxSequences padded{nullptr, seqs, static_cast<int>(L)};
  kernels::attention_softmax_bwd(dgrad, probs, padded, heads, scale, site, keep_scale, stream_);
  gemm_->stage(dgrad, seqs * block);  // dS feeds two GEMMs per head: cast once
  for (int h = 0; h < heads; ++h) {
    GemmArgs dq;  // dQ[b, h] = dS[b, h] · K[b, h]
    dq.m = L;
    dq.n = head_dim;
    dq.k = L;
    dq.A = dgrad + h * L * L;
    dq.lda = L;
    dq.stride_a = block;
    dq.B = qkv + H + h * head_dim;
    dq.ldb = ld_qkv;
    dq.stride_b = L * ld_qkv;
    dq.C = dqkv + h * head_dim;
    dq.ldc = ld_qkv;
    dq.stride_c = L * ld_qkv;
    dq.batch = seqs;
    gemm_->run(dq);
    GemmArgs dk = dq;  // dK[b, h] = dS[b, h]^T · Q[b, h]
    dk.trans_a = true;
    dk.B = qkv + h * head_dim;
    dk.C = dqkv + H + h * head_dim;
    gemm_->run(dk);
  }
}

}  // namespace bert
