// Launchers of kernels/attention_lengths.cu: per-sequence key counts for the fused (cuDNN)
// attention. Per-sequence key counts for the fused (cuDNN) attention.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace bert::kernels {

// seq_len[b] = number of leading keys of sequence b (tokens seq_start[b] .. seq_start[b+1]-1)
// whose key_bias is 0 (not masked); seq_start [num_seqs + 1] is device memory.
void attention_seq_lengths(int32_t* seq_len, const int32_t* seq_start, const float* key_bias,
                           int num_seqs, cudaStream_t stream);

}  // namespace bert::kernels
