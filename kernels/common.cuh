// Shared device helpers for the kernels in this folder: grid sizing and fixed-order warp/block
// reductions. Every reduction here combines values in the same order on every run, so the
// kernels that use them are deterministic (no atomics).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/launch_check.h"

namespace bert::kernels {

constexpr int kThreads = 256;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a 1-D grid-stride loop over n items, capped so huge tensors still launch.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = ceil_div(n, threads);
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
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
