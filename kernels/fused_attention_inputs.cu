// The fused (cuDNN) attention's device-side inputs. Key counts: its padding mask takes a length
// per sequence, while the model describes padding with the additive key_bias (0 or -10000 per
// key token); one warp per sequence counts the leading keys whose bias is 0 (BERT's input_mask is
// a prefix of ones, so this is the sequence's real length). Dropout seed: cuDNN keys its Philox
// stream by one seed, folded here from the site and the step in device memory.
#include "kernels/fused_attention_inputs.h"

#include "common.cuh"
#include "core/philox.h"

namespace bert::kernels {
namespace {

__global__ void seq_lengths_kernel(int32_t* seq_len, const int32_t* seq_start, int64_t uniform_length,
                                   const float* key_bias, int num_seqs) {
  const int b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (b >= num_seqs) return;
  const int64_t start = seq_start != nullptr ? seq_start[b] : b * uniform_length;
  const int32_t len = static_cast<int32_t>(seq_start != nullptr ? seq_start[b + 1] - start : uniform_length);
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

__global__ void dropout_seed_kernel(int64_t* seed, int64_t* offset, DropoutSite site) {
  *seed = static_cast<int64_t>(folded_seed(site.seed, step_of(site), site.tensor_id));
  *offset = 0;
}

}  // namespace

void attention_seq_lengths(int32_t* seq_len, const int32_t* seq_start, int64_t uniform_length,
                           const float* key_bias, int num_seqs, cudaStream_t stream) {
  if (num_seqs <= 0) return;
  constexpr int kWarps = kThreads / 32;
  seq_lengths_kernel<<<static_cast<unsigned>(ceil_div(num_seqs, kWarps)), kThreads, 0, stream>>>(
      seq_len, seq_start, uniform_length, key_bias, num_seqs);
  CUDA_CHECK(cudaGetLastError());
}

void attention_dropout_seed(int64_t* seed, int64_t* offset, const DropoutSite& site, cudaStream_t stream) {
  dropout_seed_kernel<<<1, 1, 0, stream>>>(seed, offset, site);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
