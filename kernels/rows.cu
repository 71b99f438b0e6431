// Row gathers, a row broadcast, and deterministic row scatter-adds (MLM head gathers, a bias
// written as a GEMM's C, embedding backward).
// scatter_add_rows stably radix-sorts (row, i) pairs with CUB; the first position of each run of
// equal rows owns that row and adds its sources in increasing i, one thread per column — no
// float atomics, and the same summation order as the CPU reference. Rows are of any activation storage type (a scatter-add
// may add 16-bit rows into fp32 ones: the embedding gradients); sums are fp32.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/rows.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

template <typename T>
__global__ void gather_rows_kernel(T* out, const T* in, const int32_t* rows, int H) {
  const int64_t i = blockIdx.x;
  const T* src = in + static_cast<int64_t>(rows[i]) * H;
  T* dst = out + i * H;
  for (int j = threadIdx.x; j < H; j += blockDim.x) dst[j] = src[j];
}

template <typename T>
__global__ void broadcast_row_kernel(T* out, const T* row, int n, int64_t ld) {
  T* dst = out + static_cast<int64_t>(blockIdx.x) * ld;
  for (int j = threadIdx.x; j < n; j += blockDim.x) dst[j] = row[j];
}

__global__ void iota_kernel(int32_t* values, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    values[i] = i;
}

// Block (b, y) handles sorted position b when it starts a run of equal row ids, for the columns
// y·blockDim.x + threadIdx.x: one thread per column adds the run's sources in increasing i. The
// run is read kRunUnroll positions at a time, so that many loads are in flight per thread: a
// long run (the token-type ids', the [PAD] word id's) keeps its summation order without
// serialising on one load at a time.
constexpr int kRunUnroll = 8;
template <typename D, typename S>
__global__ void segmented_add_kernel(D* dst, const S* src, const int32_t* sorted_rows,
                                     const int32_t* sorted_index, int n, int H) {
  const int start = blockIdx.x;
  const int32_t row = sorted_rows[start];
  if (start > 0 && sorted_rows[start - 1] == row) return;
  const int j = blockIdx.y * blockDim.x + threadIdx.x;
  if (j >= H) return;
  D* d = dst + static_cast<int64_t>(row) * H + j;
  float acc = load(d);
  for (int k = start;; k += kRunUnroll) {
    bool in_run[kRunUnroll];  // a prefix: sorted rows leave the run once
    float value[kRunUnroll];
#pragma unroll
    for (int u = 0; u < kRunUnroll; ++u) {
      in_run[u] = k + u < n && sorted_rows[k + u] == row;
      value[u] = in_run[u] ? load(src + static_cast<int64_t>(sorted_index[k + u]) * H + j) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kRunUnroll; ++u)
      if (in_run[u]) acc += value[u];
    if (!in_run[kRunUnroll - 1]) break;
  }
  store(d, acc);
}

size_t cub_sort_bytes(int n) {
  size_t bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr),
                                             static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), n));
  return bytes;
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void gather_rows(Act out, ConstAct in, const int32_t* rows, int64_t n, int H, cudaStream_t stream) {
  if (n == 0) return;
  BERT_CHECK(n <= 0x7fffffff, Code::invalid_argument, "gather_rows: ", n, " rows is too many");
  with_storage(common_storage("gather_rows", {out, in}), [&](auto tag) {
    using T = decltype(tag);
    gather_rows_kernel<T><<<static_cast<unsigned>(n), kThreads, 0, stream>>>(typed<T>(out), typed<T>(in), rows, H);
  });
  CUDA_CHECK(cudaGetLastError());
}

void broadcast_row(Act out, ConstAct row, int64_t m, int n, int64_t ld, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  BERT_CHECK(m <= 0x7fffffff, Code::invalid_argument, "broadcast_row: ", m, " rows is too many");
  with_storage(common_storage("broadcast_row", {out, row}), [&](auto tag) {
    using T = decltype(tag);
    broadcast_row_kernel<T><<<static_cast<unsigned>(m), kThreads, 0, stream>>>(typed<T>(out), typed<T>(row), n, ld);
  });
  CUDA_CHECK(cudaGetLastError());
}

size_t scatter_add_scratch_bytes(int64_t n) {
  BERT_CHECK(n <= 0x7fffffff, Code::invalid_argument, "scatter_add_rows: ", n,
             " rows is too many");
  const size_t ints = align_up(static_cast<size_t>(n) * sizeof(int32_t));
  return 3 * ints + cub_sort_bytes(static_cast<int>(n));
}

void scatter_add_rows(Act dst, ConstAct src, const int32_t* rows, int64_t n, int H, void* scratch,
                      size_t scratch_bytes, cudaStream_t stream) {
  if (n == 0) return;
  const int count = static_cast<int>(n);
  const size_t ints = align_up(static_cast<size_t>(n) * sizeof(int32_t));
  char* base = static_cast<char*>(scratch);
  auto* index = reinterpret_cast<int32_t*>(base);              // [n] 0..n-1
  auto* sorted_rows = reinterpret_cast<int32_t*>(base + ints);   // [n]
  auto* sorted_index = reinterpret_cast<int32_t*>(base + 2 * ints);  // [n]
  void* temp = base + 3 * ints;
  size_t temp_bytes = scratch_bytes - 3 * ints;
  iota_kernel<<<grid_for(n), kThreads, 0, stream>>>(index, count);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, rows, sorted_rows, index,
                                             sorted_index, count, 0, 32, stream));
  const int threads = H < kThreads ? ((H + 31) / 32) * 32 : kThreads;
  const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(ceil_div(H, threads)));
  with_storage(dst.type, [&](auto dst_tag) {
    with_storage(src.type, [&](auto src_tag) {
      using D = decltype(dst_tag);
      using S = decltype(src_tag);
      segmented_add_kernel<D, S><<<grid, threads, 0, stream>>>(
          typed<D>(dst), typed<S>(src), sorted_rows, sorted_index, count, H);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
