// Fused scale + additive key mask + softmax (+ Philox dropout) over attention scores, and its
// backward, for the reference attention path (the GEMMs run in cuBLASLt). One warp per query
// row of one sequence's [heads·L, L] block; the dropout element index is the index in the saved
// probabilities array (probs_offset + row·L + key), as on the CPU.
#include "kernels/attention_softmax.h"
#include "common.cuh"
#include "core/philox.h"

namespace bert::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ bool keep_element(const DropoutSite& site, int64_t index) {
  return philox_uniform_at(site.seed, site.step, site.tensor_id, static_cast<uint64_t>(index)) >=
         site.p;
}

__global__ void softmax_fwd_kernel(float* probs, float* dropped, const float* key_bias,
                                   int64_t rows, int L, float scale, int64_t probs_offset,
                                   DropoutSite site, float keep_scale) {
  const int64_t row = blockIdx.x * int64_t(kWarpsPerBlock) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  float* p = probs + row * L;  // [L] scores in, probabilities out
  float row_max = -INFINITY;
  for (int k = lane; k < L; k += 32) {
    const float s = __fmul_rn(p[k], scale) + key_bias[k];  // no FMA: as on the CPU
    p[k] = s;
    row_max = fmaxf(row_max, s);
  }
  row_max = warp_max(row_max);
  float sum = 0.0f;
  for (int k = lane; k < L; k += 32) {
    const float e = expf(p[k] - row_max);
    p[k] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  const int64_t index0 = probs_offset + row * L;
  for (int k = lane; k < L; k += 32) {
    const float prob = p[k] / sum;
    p[k] = prob;
    if (dropped != nullptr)
      dropped[row * L + k] =
          keep_element(site, index0 + k) ? __fmul_rn(prob, keep_scale) : 0.0f;
  }
}

__global__ void softmax_bwd_kernel(float* dgrad, const float* probs, int64_t rows, int L,
                                   float scale, int64_t probs_offset, DropoutSite site,
                                   float keep_scale) {
  const int64_t row = blockIdx.x * int64_t(kWarpsPerBlock) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  float* d = dgrad + row * L;        // [L] d(dropout(P)) in, d(scores) out
  const float* p = probs + row * L;  // [L]
  const int64_t index0 = probs_offset + row * L;
  float dot = 0.0f;
  for (int k = lane; k < L; k += 32) {
    float dp = d[k];
    if (site.p != 0.0f) dp = keep_element(site, index0 + k) ? dp * keep_scale : 0.0f;
    d[k] = dp;
    dot += p[k] * dp;
  }
  dot = warp_sum(dot);
  for (int k = lane; k < L; k += 32) d[k] = __fmul_rn(p[k], d[k] - dot) * scale;
}

}  // namespace

void attention_softmax_fwd(float* probs, float* dropped, const float* key_bias, int64_t rows,
                           int L, float scale, int64_t probs_offset, const DropoutSite& site,
                           float keep_scale, cudaStream_t stream) {
  if (rows == 0 || L == 0) return;
  const auto blocks = static_cast<unsigned>(ceil_div(rows, kWarpsPerBlock));
  softmax_fwd_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
      probs, dropped, key_bias, rows, L, scale, probs_offset, site, keep_scale);
  CUDA_CHECK(cudaGetLastError());
}

void attention_softmax_bwd(float* dgrad, const float* probs, int64_t rows, int L, float scale,
                           int64_t probs_offset, const DropoutSite& site, float keep_scale,
                           cudaStream_t stream) {
  if (rows == 0 || L == 0) return;
  const auto blocks = static_cast<unsigned>(ceil_div(rows, kWarpsPerBlock));
  softmax_bwd_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(dgrad, probs, rows, L, scale,
                                                                 probs_offset, site, keep_scale);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
