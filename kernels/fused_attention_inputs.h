// Launchers of kernels/fused_attention_inputs.cu: what the fused (cuDNN) attention reads from
// device memory besides the activations — per-sequence key counts and its dropout seed — made on
// the device, so the calls need no host upload and can be recorded in a CUDA graph.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/op_params.h"

namespace bert::kernels {

// seq_len[b] = number of leading keys of sequence b whose key_bias is 0 (not masked). Sequence b
// is tokens seq_start[b] .. seq_start[b+1]-1 (seq_start [num_seqs + 1], device memory), or, when
// seq_start is null, tokens b · uniform_length .. (b + 1) · uniform_length - 1.
void attention_seq_lengths(int32_t* seq_len, const int32_t* seq_start, int64_t uniform_length,
                           const float* key_bias, int num_seqs, cudaStream_t stream);

// *seed = folded_seed(site.seed, step, site.tensor_id) (core/philox.h), the step read from
// site.step_at when set (a replayed CUDA graph's step), else site.step; *offset = 0. (Two
// pointers: cuDNN wants each of its tensors 16-byte aligned.)
void attention_dropout_seed(int64_t* seed, int64_t* offset, const DropoutSite& site, cudaStream_t stream);

}  // namespace bert::kernels
