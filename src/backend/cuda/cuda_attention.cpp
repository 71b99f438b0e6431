// Reference attention on the GPU for padded and variable-length (packed) batches: per sequence,
// head-batched strided cuBLASLt GEMMs (per head, sequence-batched, for padded batches of more
// sequences than heads) (scores = Q·K^T, ctx = dropout(P)·V and their backward)
// around the fused scale+mask+softmax(+dropout) kernels, which run once per call over every
// sequence. Scores are written straight into the saved probs array, and dropped P and dS are
// laid out like it (in the activation type), so the dropout element index is the index there, as
// on the CPU. With 16-bit activations the GEMMs read and write them directly; with fp32 ones in
// bf16/fp16 the GEMMs read Q, K, V, dctx, dropped P and dS from 16-bit copies staged once per
// call (LtGemm::stage) rather than casting their slices for every sequence and GEMM. With
// fused attention both directions go to FusedAttention (cuDNN) instead, for every layout. How the
// GEMMs are batched, and the GEMMs, are written once in attention_plan.h, which the cost model reads too.
#include <vector>

#include "backend/cuda/attention_plan.h"
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

void CudaOps::attention_fwd_impl(const AttentionFwdArgs& a) {
  if (fused_ != nullptr) {
    fused_->forward(a.ctx, fused_stats(a.probs), a.qkv, a.key_bias, a.layout, a.heads, a.head_dim, a.site);
    return;
  }
  const AttentionShape shape(a.heads, a.head_dim, a.site);
  const kernels::SoftmaxSequences seqs = softmax_sequences(a.layout, a.heads);
  const int64_t elems = a.layout.probs_elems(a.heads);
  const Act dropped = a.site.p != 0.0f ? scratch_act(*attn_a_, elems) : Act();  // laid out as probs
  const StagedOperands staged(*gemm_);
  gemm_->stage(a.qkv, a.layout.total_tokens() * shape.ld_qkv);  // Q, K, V cast to 16 bits once, not per GEMM
  for_each_gemm_batch(shape, a.layout, [&](const AttentionBatch& x) { gemm_->run(attention_scores_gemm(shape, x, a.qkv, a.probs)); });
  kernels::attention_softmax_fwd(a.probs, dropped, a.key_bias, seqs, a.heads, shape.scale, a.site, shape.keep_scale, stream_);
  const ConstAct p = dropped.data != nullptr ? ConstAct(dropped) : a.probs;
  gemm_->stage(p, elems);
  for_each_gemm_batch(shape, a.layout, [&](const AttentionBatch& x) { gemm_->run(attention_context_gemm(shape, x, p, a.qkv, a.ctx)); });
}

void CudaOps::attention_bwd_impl(const AttentionBwdArgs& a) {
  if (fused_ != nullptr) {
    fused_->backward(a.dqkv, a.dctx, a.ctx, a.qkv, fused_stats(a.probs), a.layout, a.heads, a.head_dim, a.site);
    return;
  }
  const AttentionShape shape(a.heads, a.head_dim, a.site);
  const kernels::SoftmaxSequences seqs = softmax_sequences(a.layout, a.heads);
  const int64_t elems = a.layout.probs_elems(a.heads);
  const Act dropped = a.site.p != 0.0f ? scratch_act(*attn_a_, elems) : Act();  // laid out as probs
  const Act dgrad = scratch_act(*attn_b_, elems);                                // likewise
  // The dropout index of an element is its index in probs, for all sequences at once.
  if (dropped.data != nullptr) kernels::dropout_residual_fwd(dropped, a.probs, nullptr, elems, a.site, shape.keep_scale, 0, stream_);
  const ConstAct p = dropped.data != nullptr ? ConstAct(dropped) : a.probs;
  const StagedOperands staged(*gemm_);
  gemm_->stage(a.qkv, a.layout.total_tokens() * shape.ld_qkv);  // cast to 16 bits once, not per GEMM
  gemm_->stage(a.dctx, a.layout.total_tokens() * shape.H);
  gemm_->stage(p, elems);
  for_each_gemm_batch(shape, a.layout, [&](const AttentionBatch& x) {
    gemm_->run(attention_value_grad_gemm(shape, x, p, a.dctx, a.dqkv));
    gemm_->run(attention_probs_grad_gemm(shape, x, a.dctx, a.qkv, dgrad));
  });
  kernels::attention_softmax_bwd(dgrad, a.probs, seqs, a.heads, shape.scale, a.site, shape.keep_scale, stream_);
  gemm_->stage(dgrad, elems);  // dS feeds two GEMMs: cast once
  for_each_gemm_batch(shape, a.layout, [&](const AttentionBatch& x) {
    gemm_->run(attention_query_grad_gemm(shape, x, dgrad, a.qkv, a.dqkv));
    gemm_->run(attention_key_grad_gemm(shape, x, dgrad, a.qkv, a.dqkv));
  });
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

}  // namespace bert
