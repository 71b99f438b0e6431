// Row-major GEMMs for the CPU backend through oneDNN, which picks its kernels for the CPU it
// runs on (SSE4.1, AVX2, AVX-512, AVX512-BF16, AMX) at run time, so a default build is as fast
// as a -march=native one: C = alpha·op(A)·op(B) + beta·C with fp32 inputs, or with bf16 inputs
// and fp32 accumulation and output. They run on `threads` OpenMP threads (the same runtime as
// the backend's elementwise loops); called inside a parallel region they run on the calling
// thread alone. Deterministic for a given thread count.
#pragma once

#include <cstdint>
#include <string>

namespace bert {

template <typename T>
struct GemmOperand {
  const T* data;
  int64_t ld;       // leading dimension (row stride) as stored
  bool transposed;  // use the stored matrix transposed
};

// C[M,N] = alpha · op(A)[M,K] · op(B)[K,N] + beta · C, C with row stride ldc.
void cpu_gemm(int64_t M, int64_t N, int64_t K, float alpha, GemmOperand<float> A, GemmOperand<float> B,
              float beta, float* C, int64_t ldc, int threads);

// The same with A and B as bf16 bit patterns (uint16_t, round-to-nearest-even from fp32).
void cpu_gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, GemmOperand<uint16_t> A,
                   GemmOperand<uint16_t> B, float beta, float* C, int64_t ldc, int threads);

// One product C[M,N] = op(A)[M,K] · op(B)[K,N] + beta · C of a pair.
template <typename T>
struct GemmCall {
  int64_t M, N, K;
  GemmOperand<T> A, B;
  float beta;
  float* C;
  int64_t ldc;
};

// Two independent products at once, as a dense layer's backward pass has (dW and dX): each
// product's C is cut into column slices and every slice is one single-threaded call, the slices
// shared out among `threads` threads (on two threads: each product whole on a thread of its own).
// oneDNN's own split of one product over both threads was slower: bert-large's backward products
// on 512 tokens, two threads of an AMD EPYC (Zen 4), took 2167 ms of a micro-batch-4 step one
// after the other and 1957 at once (tests/bench/bench_op_profile.cpp, linear_bwd). The bits
// depend on the thread count (the slices), not on the timing.
void cpu_gemm_pair(const GemmCall<float>& first, const GemmCall<float>& second, int threads);
void cpu_gemm_pair_bf16(const GemmCall<uint16_t>& first, const GemmCall<uint16_t>& second, int threads);

// Sets the calling thread's OpenMP team size (oneDNN sizes its team by omp_get_max_threads())
// for the object's life and puts the host's back after.
class ScopedTeamSize {
 public:
  explicit ScopedTeamSize(int threads);
  ~ScopedTeamSize();
  ScopedTeamSize(const ScopedTeamSize&) = delete;
  ScopedTeamSize& operator=(const ScopedTeamSize&) = delete;

 private:
  int previous_;
};

// dst[i] = src[i] as bf16 bits, rounded to nearest even (NaN stays a quiet NaN): bit for bit
// core/half.h's float_to_bf16_bits, vectorised for the CPU it runs on (the operands of
// cpu_gemm_bf16 and the weights' bf16 copy are made by it).
void floats_to_bf16(uint16_t* dst, const float* src, int64_t n);

// Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX), as oneDNN sees it (the
// ONEDNN_MAX_CPU_ISA environment variable lowers what it sees), and the ISA's name.
bool cpu_has_native_bf16();
std::string cpu_isa_name();

}  // namespace bert
