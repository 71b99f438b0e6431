// Launchers of kernels/attention_softmax.cu: the attention softmax (scale, key mask, dropout)
// forward and backward over every sequence of a batch in one launch.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"
#include "core/op_params.h"

namespace bert::kernels {

// Where each sequence's block lies. Sequence b has L_b tokens starting at token t_b, and its
// probabilities are a [heads·L_b, L_b] block at probs_offset_b (AttentionLayout::probs_offset).
// Padded batches (table null): L_b = len, t_b = b·len, probs_offset_b = b·heads·len².
// Packed batches: table is device memory holding t_0..t_num_seqs (num_seqs + 1 token starts)
// followed by probs_offset_0..probs_offset_{num_seqs-1}, and len is the longest L_b.
struct SoftmaxSequences {
  const int64_t* table = nullptr;
  int num_seqs = 0;  // at most 65535
  int len = 0;
};

// In place over every sequence: scores (raw Q·K^T) -> P = softmax(scores·scale + key_bias[t_b + k])
// per row. When dropped is not null (laid out as probs) it receives dropout(P), the Philox
// index of an element being its index in probs. probs and dropped share one storage type; the
// arithmetic is fp32.
void attention_softmax_fwd(Act probs, Act dropped, const float* key_bias, const SoftmaxSequences& seqs, int heads,
                           float scale, const DropoutSite& site, float keep_scale, cudaStream_t stream);
// In place: dgrad (laid out as probs) holds d(dropout(P)); becomes
// d(scores) = P ⊙ (dP - Σ_k P dP) · scale.
void attention_softmax_bwd(Act dgrad, ConstAct probs, const SoftmaxSequences& seqs, int heads, float scale,
                           const DropoutSite& site, float keep_scale, cudaStream_t stream);

}  // namespace bert::kernels
