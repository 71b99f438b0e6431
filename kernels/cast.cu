// Casts between fp32 and the 16-bit formats (bf16, IEEE fp16) with an optional scale, rounding
// to nearest even: GEMM inputs in mixed precision, the fused attention's I/O and the gradient
// all-reduce's wire format. 16-byte aligned buffers move 8 elements per thread with 128-bit
// loads and stores; anything else (and the tail) goes element by element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cast.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

constexpr int kVec = 8;  // elements per 128-bit access of 16-bit values

// Elements [first, n) one at a time, grid-stride.
template <typename T>
__device__ void cast_to_scalar(T* dst, const float* src, int64_t first, int64_t n, float scale) {
  for (int64_t i = first + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store(&dst[i], src[i] * scale);
}

template <typename T>
__global__ void cast_to_kernel(T* dst, const float* src, int64_t n, float scale, bool vector) {
  int64_t first = 0;
  if (vector) {
    const int64_t groups = n / kVec;
    for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups;
         g += int64_t(gridDim.x) * blockDim.x) {
      const float4 a = reinterpret_cast<const float4*>(src)[2 * g];
      const float4 b = reinterpret_cast<const float4*>(src)[2 * g + 1];
      const float v[kVec] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      union {
        uint4 bits;
        T h[kVec];
      } out;
      for (int j = 0; j < kVec; ++j) store(&out.h[j], v[j] * scale);
      reinterpret_cast<uint4*>(dst)[g] = out.bits;
    }
    first = groups * kVec;
  }
  cast_to_scalar(dst, src, first, n, scale);
}

template <typename T>
__global__ void cast_from_kernel(float* dst, const T* src, int64_t n, float scale, bool vector) {
  int64_t first = 0;
  if (vector) {
    const int64_t groups = n / kVec;
    for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups;
         g += int64_t(gridDim.x) * blockDim.x) {
      union {
        uint4 bits;
        T h[kVec];
      } in;
      in.bits = reinterpret_cast<const uint4*>(src)[g];
      float v[kVec];
      for (int j = 0; j < kVec; ++j) v[j] = load(&in.h[j]) * scale;
      reinterpret_cast<float4*>(dst)[2 * g] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(dst)[2 * g + 1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    first = groups * kVec;
  }
  for (int64_t i = first + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = load(&src[i]) * scale;
}

bool aligned16(const void* a, const void* b) {
  return (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0;
}

}  // namespace

void cast_to_lowp(void* dst, const float* src, int64_t n, float scale, LowPrecision kind,
                  cudaStream_t stream) {
  if (n <= 0) return;
  const bool vector = aligned16(dst, src);
  const unsigned grid = grid_for(vector ? ceil_div(n, kVec) : n);
  if (kind == LowPrecision::bf16) {
    cast_to_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), src, n, scale,
                                                  vector);
  } else {
    cast_to_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__half*>(dst), src, n, scale, vector);
  }
  CUDA_CHECK(cudaGetLastError());
}

void cast_from_lowp(float* dst, const void* src, int64_t n, float scale, LowPrecision kind,
                    cudaStream_t stream) {
  if (n <= 0) return;
  const bool vector = aligned16(dst, src);
  const unsigned grid = grid_for(vector ? ceil_div(n, kVec) : n);
  if (kind == LowPrecision::bf16) {
    cast_from_kernel<<<grid, kThreads, 0, stream>>>(dst, static_cast<const __nv_bfloat16*>(src), n,
                                                    scale, vector);
  } else {
    cast_from_kernel<<<grid, kThreads, 0, stream>>>(dst, static_cast<const __half*>(src), n, scale,
                                                    vector);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
