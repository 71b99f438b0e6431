// Casts for mixed-precision GEMMs: fp32 -> bf16 (round to nearest even) into scratch buffers
// that cuBLASLt reads as CUDA_R_16BF inputs.
#include <cuda_bf16.h>

#include "backend/cuda/kernel_launch.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

__global__ void cast_to_bf16_kernel(__nv_bfloat16* dst, const float* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

}  // namespace

void cast_to_bf16(void* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  cast_to_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst),
                                                            src, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
