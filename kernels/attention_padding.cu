// Packed [T, width] rows (fp32, or already of the padded batch's 16-bit type) <-> a padded
// [B, S_pad, width] 16-bit batch, with the cast (if any) in the same pass: the fused attention
// runs cuDNN's padded graphs on variable-length batches this way where cuDNN has no ragged
// backward. Each thread moves one group of 8 elements (128-bit 16-bit accesses) when width is a
// multiple of 8 and both buffers are 16-byte aligned, else one element; a padded row finds its
// packed row from seq_start (row r is position r % S_pad of sequence r / S_pad).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

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

// V consecutive values of storage type S as floats (16-bit values widen exactly).
template <typename S, int V>
__device__ __forceinline__ void load_values(float (&v)[V], const S* src) {
  if constexpr (V == 8 && std::is_same_v<S, float>) {
    const float4 a = reinterpret_cast<const float4*>(src)[0];
    const float4 b = reinterpret_cast<const float4*>(src)[1];
    const float all[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    for (int j = 0; j < 8; ++j) v[j] = all[j];
  } else if constexpr (V == 8) {
    Group<S, V> in;
    in.bits = reinterpret_cast<const decltype(in.bits)*>(src)[0];
    for (int j = 0; j < V; ++j) v[j] = load(&in.h[j]);
  } else {
    for (int j = 0; j < V; ++j) v[j] = load(src + j);
  }
}

// V floats stored as S (rounded to nearest even when S is 16-bit).
template <typename S, int V>
__device__ __forceinline__ void store_values(S* dst, const float (&v)[V]) {
  if constexpr (V == 8 && std::is_same_v<S, float>) {
    reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else if constexpr (V == 8) {
    Group<S, V> out;
    for (int j = 0; j < V; ++j) store(&out.h[j], v[j]);
    reinterpret_cast<decltype(out.bits)*>(dst)[0] = out.bits;
  } else {
    for (int j = 0; j < V; ++j) store(dst + j, v[j]);
  }
}

// One (padded row, group of V) per iteration of a grid-stride loop over rows * width / V; T is
// the padded batch's 16-bit type, S the packed rows' storage type.
template <typename T, typename S, int V>
__global__ void pad_kernel(T* padded, const S* packed, const int32_t* seq_start, int64_t rows,
                           int64_t padded_len, int width) {
  const int64_t groups = width / V;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * groups;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / groups, col = (i % groups) * V;
    const int64_t src = packed_row(seq_start, r, padded_len);
    float v[V];
    if (src >= 0) {
      load_values<S, V>(v, packed + src * width + col);
    } else {
      for (int j = 0; j < V; ++j) v[j] = 0.0f;
    }
    store_values<T, V>(padded + r * width + col, v);
  }
}

template <typename T, typename S, int V>
__global__ void unpad_kernel(S* packed, const T* padded, const int32_t* seq_start,
                             int64_t rows, int64_t padded_len, int width) {
  const int64_t groups = width / V;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * groups;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / groups, col = (i % groups) * V;
    const int64_t dst = packed_row(seq_start, r, padded_len);
    if (dst < 0) continue;
    float v[V];
    load_values<T, V>(v, padded + r * width + col);
    store_values<S, V>(packed + dst * width + col, v);
  }
}

bool vectorizable(const void* a, const void* b, int width) {
  return width % 8 == 0 && (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0;
}

template <typename T, typename S>
void launch_pad(void* padded, const S* packed, const int32_t* seq_start, int64_t rows,
                int64_t padded_len, int width, cudaStream_t stream) {
  auto* out = static_cast<T*>(padded);
  if (vectorizable(padded, packed, width)) {
    pad_kernel<T, S, 8><<<grid_for(rows * (width / 8)), kThreads, 0, stream>>>(
        out, packed, seq_start, rows, padded_len, width);
  } else {
    pad_kernel<T, S, 1><<<grid_for(rows * width), kThreads, 0, stream>>>(out, packed, seq_start, rows,
                                                                         padded_len, width);
  }
}

template <typename T, typename S>
void launch_unpad(S* packed, const void* padded, const int32_t* seq_start, int64_t rows,
                  int64_t padded_len, int width, cudaStream_t stream) {
  const auto* in = static_cast<const T*>(padded);
  if (vectorizable(padded, packed, width)) {
    unpad_kernel<T, S, 8><<<grid_for(rows * (width / 8)), kThreads, 0, stream>>>(
        packed, in, seq_start, rows, padded_len, width);
  } else {
    unpad_kernel<T, S, 1><<<grid_for(rows * width), kThreads, 0, stream>>>(packed, in, seq_start, rows,
                                                                           padded_len, width);
  }
}

// Calls launch(S{}, L{}) with S the C++ type of the packed rows (fp32 or the padded batch's own
// 16-bit type: anything else is refused) and L that of the padded batch's 16-bit type.
template <typename Launch>
void with_row_types(const char* op, DType packed, LowPrecision kind, Launch&& launch) {
  const DType lowp = storage_type(kind);
  BERT_CHECK(packed == DType::f32 || packed == lowp, Code::internal, op, ": packed rows of type ",
             dtype_name(packed), " for a ", dtype_name(lowp), " padded batch");
  with_storage(packed, [&](auto rows) {
    if (kind == LowPrecision::bf16) {
      launch(rows, __nv_bfloat16{});
    } else {
      launch(rows, __half{});
    }
  });
}

}  // namespace

void pad_rows_to_lowp(void* padded, ConstAct packed, const int32_t* seq_start, int num_seqs,
                      int64_t padded_len, int width, LowPrecision kind, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(num_seqs) * padded_len;
  if (rows <= 0 || width <= 0) return;
  with_row_types("pad_rows_to_lowp", packed.type, kind, [&](auto source, auto lowp) {
    launch_pad<decltype(lowp)>(padded, typed<decltype(source)>(packed), seq_start, rows, padded_len, width, stream);
  });
  CUDA_CHECK(cudaGetLastError());
}

void unpad_rows_from_lowp(Act packed, const void* padded, const int32_t* seq_start, int num_seqs,
                          int64_t padded_len, int width, LowPrecision kind, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(num_seqs) * padded_len;
  if (rows <= 0 || width <= 0) return;
  with_row_types("unpad_rows_from_lowp", packed.type, kind, [&](auto target, auto lowp) {
    launch_unpad<decltype(lowp)>(typed<decltype(target)>(packed), padded, seq_start, rows, padded_len, width, stream);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
