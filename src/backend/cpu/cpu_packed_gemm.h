// A dense layer's forward product C = X·Wᵀ (+ bias) from a copy of W packed once into panels of
// 48 columns, for inference models on AVX-512 CPUs when X has few rows (one or two sequences).
// There oneDNN's sgemm reads the weights from memory at a low rate: bert-base's products on 128
// rows, each of 12 weight sets in turn as in a forward pass, ran at 124-141 GFLOP/s on one thread
// of an Intel Xeon w/ AMX against 161-168 for the packed panels read in order while the next is
// prefetched (1.16-1.29x; 256 rows 1.04-1.10x; 384 rows 0.98-1.06x: larger products stay with
// oneDNN). tests/bench/bench_packed_gemm measures it.
// Each element of C sums its k-blocks in order on one thread: the bits do not depend on the
// thread count nor on the number of rows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bert {

// The most rows of X the packed product is used for.
constexpr int64_t kPackedGemmMaxRows = 256;

// Whether this CPU runs the packed product: AVX-512 as oneDNN sees it, so that
// ONEDNN_MAX_CPU_ISA=AVX2 turns it off with oneDNN's own AVX-512 kernels.
bool packed_gemm_supported();

class PackedWeight {
 public:
  // Packs W [N, K] (row-major, row stride K) on `threads` threads.
  PackedWeight(const float* W, int64_t N, int64_t K, int threads);
  ~PackedWeight();
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;

  // C[M, N] = X[M, K]·Wᵀ, plus bias[N] on every row when bias is not null (after the sum, as a
  // separate bias pass would); X and C with row strides ldx and ldc. Runs on `threads` threads
  // (one inside a parallel region); `scratch` holds scratch_floats(M, threads) floats.
  void multiply(int64_t M, const float* X, int64_t ldx, const float* bias, float* C, int64_t ldc, int threads,
                float* scratch) const;
  static size_t scratch_floats(int64_t M, int threads);

  size_t bytes() const { return bytes_; }
  bool packs(int64_t N, int64_t K) const { return N == N_ && K == K_; }

 private:
  const float* panel(int64_t k0, int64_t p) const;

  int64_t N_, K_, panels_;
  size_t bytes_;
  float* data_;  // [k-block][panel][k][48], columns past N zero
};

}  // namespace bert
