// Per-sequence valid key counts for the fused (cuDNN) attention: its padding mask takes a length
// per sequence, while the model describes padding with the additive key_bias (0 or -10000 per
// key token). One warp per sequence counts the leading keys whose bias is 0; BERT's input_mask
// is a prefix of ones, so this is the sequence's real length.
#include "kernels/attention_lengths.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

__global__ void seq_lengths_kernel(int32_t* seq_len, const int32_t* seq_start,
                                   const float* key_bias, int num_seqs) {
  const int b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (b >= num_seqs) return;
  const int32_t start = seq_start[b], len = seq_start[b + 1] - start;
  // The first masked key (or len): min over the warp of each lane's first masked index.
  int32_t first_masked = len;
  for (int32_t k = lane; k < len; k += 32) {
    if (key_bias[start + k] != 0.0f) {
      first_masked = k;
      break;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1)
    first_masked = min(first_masked, __shfl_xor_sync(0xffffffffu, first_masked, offset));
  if (lane == 0) seq_len[b] = first_masked;
}

}  // namespace

void attention_seq_lengths(int32_t* seq_len, const int32_t* seq_start, const float* key_bias,
                           int num_seqs, cudaStream_t stream) {
  if (num_seqs <= 0) return;
  constexpr int kWarps = kThreads / 32;
  seq_lengths_kernel<<<static_cast<unsigned>(ceil_div(num_seqs, kWarps)), kThreads, 0, stream>>>(
      seq_len, seq_start, key_bias, num_seqs);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
