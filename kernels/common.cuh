// Shared device helpers for the kernels in this folder: grid sizing, fixed-order warp/block
// reductions, and the activation storage types (fp32, bf16, fp16) the kernels are templated on.
// Every reduction here combines values in the same order on every run, so the kernels that use
// them are deterministic (no atomics).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "core/act.h"
#include "core/op_params.h"
#include "kernels/launch_check.h"

namespace bert::kernels {

constexpr int kThreads = 256;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a 1-D grid-stride loop over n items, capped so huge tensors still launch.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = ceil_div(n, threads);
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

// Activation storage: kernels compute in fp32 registers; load() widens a stored value and
// store() rounds to the storage type (nearest even); cast.cu's casts are made of them.
__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }

// The dropout step a kernel draws its mask with: the one in device memory when the site names
// one (a replayed CUDA graph reads each replay's step there), else the site's own.
__device__ __forceinline__ uint64_t step_of(const DropoutSite& site) {
  return site.step_at != nullptr ? *site.step_at : site.step;
}

// A scale factor as the kernel runs: the float in device memory when the argument names one.
__device__ __forceinline__ float value_of(const ScaleArg& scale) {
  return scale.at != nullptr ? *scale.at : scale.value;
}

// Host side: calls launch(T{}) with T the C++ type stored for `type`, so a launcher picks the
// kernel instantiation of its tensors' storage type.
template <typename Launch>
void with_storage(DType type, Launch&& launch) {
  switch (type) {
    case DType::f32: launch(float{}); break;
    case DType::bf16: launch(__nv_bfloat16{}); break;
    case DType::f16: launch(__half{}); break;
  }
}

// The storage type shared by an op's activation tensors (null ones ignored); Error(internal)
// naming the op when they differ.
inline DType common_storage(const char* op, std::initializer_list<ConstAct> tensors) {
  DType type = DType::f32;
  bool seen = false;
  for (const ConstAct& t : tensors) {
    if (t.data == nullptr) continue;
    BERT_CHECK(!seen || t.type == type, Code::internal, op, ": activation tensors of different storage types (",
               dtype_name(type), " and ", dtype_name(t.type), ")");
    type = t.type;
    seen = true;
  }
  return type;
}

template <typename T>
T* typed(Act a) {
  return static_cast<T*>(a.data);
}
template <typename T>
const T* typed(ConstAct a) {
  return static_cast<const T*>(a.data);
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `shared` holds 32 values.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // shared may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  T total = lane < warps ? shared[lane] : T(0);
  return warp_sum(total);
}

// Segment owning global chunk c of a SegmentTable: the last s with chunk_start[s] <= c (empty
// segments share their start with the next segment and are skipped that way).
__device__ inline int segment_of_chunk(const int64_t* chunk_start, int segments, int64_t c) {
  int lo = 0, hi = segments - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (chunk_start[mid] <= c) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace bert::kernels
