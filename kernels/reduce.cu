// Deterministic reductions: column sums (bias gradients) over fixed row chunks, and per-segment
// sums of squares (global gradient norm, LAMB trust ratios) over fixed element chunks. Partials
// are double and are combined by fixed-order trees and loops, never by atomics.
#include "kernels/reduce.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

constexpr int kColTile = 32;
constexpr int kRowLanes = 8;

template <typename T>
__global__ void column_partials_kernel(double* partials, const T* a, int64_t M, int N) {
  __shared__ double s_acc[kRowLanes][kColTile + 1];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * kColumnSumRowsPerChunk;
  const int64_t r1 = min(M, r0 + kColumnSumRowsPerChunk);
  double acc = 0.0;
  if (col < N) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) acc += load(a + r * N + col);
  }
  s_acc[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < N) {
    double total = 0.0;
    for (int k = 0; k < kRowLanes; ++k) total += s_acc[k][threadIdx.x];
    partials[chunk * N + col] = total;
  }
}

__global__ void column_finish_kernel(float* out, const double* partials, int chunks, int N) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= N) return;
  double total = 0.0;
  for (int c = 0; c < chunks; ++c) total += partials[static_cast<int64_t>(c) * N + col];
  out[col] += static_cast<float>(total);
}

__global__ void sumsq_partials_kernel(double* partials, const float* x, SegmentTable table) {
  __shared__ double shared[32];
  const int64_t c = blockIdx.x;
  const int s = segment_of_chunk(table.chunk_start, table.segments, c);
  const int64_t begin = (c - table.chunk_start[s]) * kSegmentChunk;
  const int64_t end = min(table.size[s], begin + kSegmentChunk);
  const float* seg = x + table.offset[s];
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = seg[i];
    acc += v * v;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[c] = acc;
}

__global__ void partials_finish_kernel(double* out, const double* partials, SegmentTable table, int sets) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(sets) * table.segments) return;
  const int64_t set = i / table.segments;
  const int s = static_cast<int>(i - set * table.segments);
  const double* set_partials = partials + set * table.chunks;
  double total = 0.0;
  for (int64_t c = table.chunk_start[s]; c < table.chunk_start[s + 1]; ++c) total += set_partials[c];
  out[i] = total;
}

}  // namespace

int column_sum_chunks(int64_t M) {
  return static_cast<int>(row_chunks(M, kColumnSumRowsPerChunk));
}

void column_sum_add(float* out, ConstAct a, int64_t M, int N, double* partials, cudaStream_t stream) {
  if (M == 0) return;
  const int chunks = column_sum_chunks(M);
  const dim3 grid(static_cast<unsigned>(ceil_div(N, kColTile)), static_cast<unsigned>(chunks));
  with_storage(a.type, [&](auto tag) {
    using T = decltype(tag);
    column_partials_kernel<T><<<grid, dim3(kColTile, kRowLanes), 0, stream>>>(partials, typed<T>(a), M, N);
  });
  CUDA_CHECK(cudaGetLastError());
  column_finish_kernel<<<static_cast<unsigned>(ceil_div(N, kThreads)), kThreads, 0, stream>>>(
      out, partials, chunks, N);
  CUDA_CHECK(cudaGetLastError());
}

void segment_sumsq(double* out, const float* x, const SegmentTable& table, double* partials,
                   cudaStream_t stream) {
  if (table.segments == 0) return;
  if (table.chunks > 0) {
    BERT_CHECK(table.chunks <= 0x7fffffff, Code::invalid_argument, "segment_sumsq: ",
               table.chunks, " chunks is too many");
    sumsq_partials_kernel<<<static_cast<unsigned>(table.chunks), kThreads, 0, stream>>>(
        partials, x, table);
    CUDA_CHECK(cudaGetLastError());
  }
  segment_partials_finish(out, partials, table, 1, stream);
}

void segment_partials_finish(double* out, const double* partials, const SegmentTable& table, int sets,
                             cudaStream_t stream) {
  if (table.segments == 0 || sets == 0) return;
  const int64_t n = int64_t(sets) * table.segments;
  partials_finish_kernel<<<static_cast<unsigned>(ceil_div(n, kThreads)), kThreads, 0, stream>>>(
      out, partials, table, sets);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
