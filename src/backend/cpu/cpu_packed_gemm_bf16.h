// A dense layer's forward product C = X·Wᵀ (+ bias) with bf16 inputs from a bf16 copy of W
// reordered once into the blocked layout oneDNN's matmul kernels (brgemm) read, for inference
// models with bf16 GEMM inputs. oneDNN's bf16 GEMM (cpu_gemm_bf16) packs W again on every call:
// on an inference call's few rows that packing is a large share of the product. bert-base's
// products on 128 rows, the 12 layers' weight sets in turn as in a forward pass, AMD EPYC (Zen 4,
// AVX512-BF16): one thread 184-193 GFLOP/s through the GEMM, 210-216 from the reordered copy
// (1.12-1.14x); two threads 1.07-1.20x. On more rows the two run alike (384 rows on one thread,
// 1,024 on two: 0.95-1.08x), so every forward-only product takes the copy
// (tests/bench/bench_packed_gemm measures it).
// The copy holds W rounded to bf16 exactly as floats_to_bf16 rounds it, so the products' inputs
// are those of cpu_gemm_bf16; the sums' order is oneDNN's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace bert {

class PackedWeightBf16 {
 public:
  // Rounds W [N, K] (row-major, row stride K) to bf16 and reorders it, on `threads` threads.
  PackedWeightBf16(const float* W, int64_t N, int64_t K, int threads);
  ~PackedWeightBf16();
  PackedWeightBf16(const PackedWeightBf16&) = delete;
  PackedWeightBf16& operator=(const PackedWeightBf16&) = delete;

  // C[M, N] = X[M, K]·Wᵀ, plus bias[N] on every row when bias is not null; X (bf16 bits) and C
  // dense, their row strides K and N (oneDNN 2.6 runs strided ones through a far slower kernel).
  // Runs on `threads` threads; not inside a parallel region.
  void multiply(int64_t M, const uint16_t* X, const float* bias, float* C, int threads);

  size_t bytes() const;
  bool packs(int64_t N, int64_t K) const { return N == N_ && K == K_; }
  // The matmul primitives kept (one per shape of X multiplied).
  size_t primitives() const;

 private:
  // One call of the primitive for M rows (made now if there is none).
  void run(int64_t M, const uint16_t* X, const float* bias, float* C, int threads);

  struct Dnnl;  // oneDNN's engine, stream, the reordered copy and its primitives (cpu_packed_gemm_bf16.cpp)

  int64_t N_, K_;
  std::unique_ptr<Dnnl> dnnl_;
};

}  // namespace bert
