// Launchers of kernels/attention_softmax.cu: the attention softmax (scale, key mask, dropout)
// forward and backward. One sequence's [rows = heads·L, L] block at probs_offset.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/op_params.h"

namespace bert::kernels {

// In place: scores (raw Q·K^T) -> P = softmax(scores·scale + key_bias[k]). When dropped is not
// null it receives dropout(P) with Philox index probs_offset + (element index in the block).
void attention_softmax_fwd(float* probs, float* dropped, const float* key_bias, int64_t rows,
                           int L, float scale, int64_t probs_offset, const DropoutSite& site,
                           float keep_scale, cudaStream_t stream);
// In place: dgrad holds d(dropout(P)); becomes d(scores) = P ⊙ (dP - Σ_k P dP) · scale.
void attention_softmax_bwd(float* dgrad, const float* probs, int64_t rows, int L, float scale,
                           int64_t probs_offset, const DropoutSite& site, float keep_scale,
                           cudaStream_t stream);

}  // namespace bert::kernels
