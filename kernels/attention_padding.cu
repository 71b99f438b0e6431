// Packed [T, width] fp32 rows <-> a padded [B, S_pad, width] 16-bit batch, with the cast in the
// same pass: the fused attention runs cuDNN's padded graphs on variable-length batches this way
// where cuDNN has no ragged backward. Each thread moves one group of 8 elements (128-bit 16-bit
// accesses) when width is a multiple of 8 and both buffers are 16-byte aligned, else one
// element; a padded row finds its packed row from seq_start (row r is position r % S_pad of
// sequence r / S_pad).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/attention_padding.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

// The packed row of padded row r, or -1 when r is padding.
__device__ __forceinline__ int64_t packed_row(const int32_t* seq_start, int64_t r,
                                              int64_t padded_len) {
  const int64_t b = r / padded_len, s = r % padded_len;
  const int32_t start = seq_start[b];
  return s < seq_start[b + 1] - start ? start + s : -1;
}

// V consecutive 16-bit values, stored with one access when V is 8.
template <typename T, int V>
union Group {
  T h[V];
  std::conditional_t<V == 8, uint4, T> bits;
};

template <int V>
__device__ __forceinline__ void load_floats(float (&v)[V], const float* src) {
  if constexpr (V == 8) {
    const float4 a = reinterpret_cast<const float4*>(src)[0];
    const float4 b = reinterpret_cast<const float4*>(src)[1];
    const float all[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    for (int j = 0; j < 8; ++j) v[j] = all[j];
  } else {
    for (int j = 0; j < V; ++j) v[j] = src[j];
  }
}

template <int V>
__device__ __forceinline__ void store_floats(float* dst, const float (&v)[V]) {
  if constexpr (V == 8) {
    reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    for (int j = 0; j < V; ++j) dst[j] = v[j];
  }
}

// One (padded row, group of V) per iteration of a grid-stride loop over rows * width / V.
template <typename T, int V>
__global__ void pad_kernel(T* padded, const float* packed, const int32_t* seq_start, int64_t rows,
                           int64_t padded_len, int width) {
  const int64_t groups = width / V;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * groups;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / groups, col = (i % groups) * V;
    const int64_t src = packed_row(seq_start, r, padded_len);
    Group<T, V> out;
    if (src >= 0) {
      float v[V];
      load_floats<V>(v, packed + src * width + col);
      for (int j = 0; j < V; ++j) store(&out.h[j], v[j]);
    } else {
      for (int j = 0; j < V; ++j) store(&out.h[j], 0.0f);
    }
    reinterpret_cast<decltype(out.bits)*>(padded + r * width + col)[0] = out.bits;
  }
}

template <typename T, int V>
__global__ void unpad_kernel(float* packed, const T* padded, const int32_t* seq_start,
                             int64_t rows, int64_t padded_len, int width) {
  const int64_t groups = width / V;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * groups;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / groups, col = (i % groups) * V;
    const int64_t dst = packed_row(seq_start, r, padded_len);
    if (dst < 0) continue;
    Group<T, V> in;
    in.bits = reinterpret_cast<const decltype(in.bits)*>(padded + r * width + col)[0];
    float v[V];
    for (int j = 0; j < V; ++j) v[j] = load(&in.h[j]);
    store_floats<V>(packed + dst * width + col, v);
  }
}

bool vectorizable(const void* a, const void* b, int width) {
  return width % 8 == 0 && (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0;
}

template <typename T>
void launch_pad(void* padded, const float* packed, const int32_t* seq_start, int64_t rows,
                int64_t padded_len, int width, cudaStream_t stream) {
  auto* out = static_cast<T*>(padded);
  if (vectorizable(padded, packed, width)) {
    pad_kernel<T, 8><<<grid_for(rows * (width / 8)), kThreads, 0, stream>>>(
        out, packed, seq_start, rows, padded_len, width);
  } else {
    pad_kernel<T, 1><<<grid_for(rows * width), kThreads, 0, stream>>>(out, packed, seq_start, rows,
                                                                      padded_len, width);
  }
}

template <typename T>
void launch_unpad(float* packed, const void* padded, const int32_t* seq_start, int64_t rows,
                  int64_t padded_len, int width, cudaStream_t stream) {
  const auto* in = static_cast<const T*>(padded);
  if (vectorizable(padded, packed, width)) {
    unpad_kernel<T, 8><<<grid_for(rows * (width / 8)), kThreads, 0, stream>>>(
        packed, in, seq_start, rows, padded_len, width);
  } else {
    unpad_kernel<T, 1><<<grid_for(rows * width), kThreads, 0, stream>>>(packed, in, seq_start, rows,
                                                                        padded_len, width);
  }
}

}  // namespace

void pad_rows_to_lowp(void* padded, const float* packed, const int32_t* seq_start, int num_seqs,
                      int64_t padded_len, int width, LowPrecision kind, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(num_seqs) * padded_len;
  if (rows <= 0 || width <= 0) return;
  if (kind == LowPrecision::bf16) {
    launch_pad<__nv_bfloat16>(padded, packed, seq_start, rows, padded_len, width, stream);
  } else {
    launch_pad<__half>(padded, packed, seq_start, rows, padded_len, width, stream);
  }
  CUDA_CHECK(cudaGetLastError());
}

void unpad_rows_from_lowp(float* packed, const void* padded, const int32_t* seq_start,
                          int num_seqs, int64_t padded_len, int width, LowPrecision kind,
                          cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(num_seqs) * padded_len;
  if (rows <= 0 || width <= 0) return;
  if (kind == LowPrecision::bf16) {
    launch_unpad<__nv_bfloat16>(packed, padded, seq_start, rows, padded_len, width, stream);
  } else {
    launch_unpad<__half>(packed, padded, seq_start, rows, padded_len, width, stream);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
