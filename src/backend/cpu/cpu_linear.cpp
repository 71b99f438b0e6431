// Dense layers on the CPU: out = act(in · W^T + b) with a oneDNN GEMM and a fused bias +
// activation epilogue, the activation alone (for recomputation), and the backward pass
// (dW, db accumulate; din overwritten or added).
// Column reductions run over rows in a fixed order, so db does not depend on the thread count.
// With bf16 GEMM inputs the products take bf16 copies (round to nearest even) of both operands.
#include <algorithm>

#include "backend/cpu/cpu_activation.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kColumnBlock = 32;

}  // namespace

void CpuOps::set_weights(const float* params, int64_t n) {
  weights_ = params;
  weight_count_ = n;
  weights_bf16_fresh_ = false;
}

GemmOperand<uint16_t> CpuOps::bf16_operand(GemmOperand<float> X, int64_t rows, int64_t cols,
                                           std::vector<uint16_t>& scratch) {
  const bool is_weight = weights_ != nullptr && X.data >= weights_ && X.data + rows * X.ld <= weights_ + weight_count_;
  if (is_weight) {
    if (!weights_bf16_fresh_) {
      weights_bf16_.resize(static_cast<size_t>(weight_count_));
      const int64_t chunks = (weight_count_ + kParallelElements - 1) / kParallelElements;
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * kParallelElements;
        floats_to_bf16(weights_bf16_.data() + begin, weights_ + begin, std::min(kParallelElements, weight_count_ - begin));
      }
      weights_bf16_fresh_ = true;
    }
    return {weights_bf16_.data() + (X.data - weights_), X.ld, X.transposed};
  }
  scratch.resize(static_cast<size_t>(rows * cols));
#pragma omp parallel for num_threads(threads_) if (rows * cols > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) floats_to_bf16(scratch.data() + r * cols, X.data + r * X.ld, cols);
  return {scratch.data(), cols, X.transposed};
}

void CpuOps::linear_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<float> A, GemmOperand<float> B, float beta,
                         float* C, int64_t ldc) {
  if (!bf16_gemm_inputs_) return cpu_gemm(M, N, K, 1.0f, A, B, beta, C, ldc, threads_);
  linear_gemm(M, N, K, bf16_operand(A, A.transposed ? K : M, A.transposed ? M : K, bf16_a_), B, beta, C, ldc);
}

void CpuOps::linear_gemm(int64_t M, int64_t N, int64_t K, GemmOperand<uint16_t> A, GemmOperand<float> B,
                         float beta, float* C, int64_t ldc) {
  const auto b = bf16_operand(B, B.transposed ? N : K, B.transposed ? K : N, bf16_b_);
  cpu_gemm_bf16(M, N, K, 1.0f, A, b, beta, C, ldc, threads_);
}

void CpuOps::linear_fwd_f32(float* out, float* pre_act, const float* in, const float* W,
                             const float* b, int64_t M, int K, int N, Activation act) {
  if (M == 0) return;
  // With an activation the GEMM lands in pre_act and the epilogue writes out from it.
  float* gemm_out = act == Activation::none ? out : pre_act;  // [M, N]
  linear_gemm(M, N, K, {in, K, false}, {W, K, true}, 0.0f, gemm_out, N);
  if (act == Activation::none && b == nullptr) return;
#pragma omp parallel for num_threads(threads_) if (M * N > kParallelElements)
  for (int64_t i = 0; i < M; ++i) {
    float* row = gemm_out + i * N;
    if (b != nullptr) {
      for (int j = 0; j < N; ++j) row[j] += b[j];
    }
    if (act != Activation::none) activation_array(act, out + i * N, row, N);
  }
}

void CpuOps::activation_fwd_f32(float* out, const float* pre, int64_t n, Activation act) {
  const int64_t chunks = (n + kParallelElements - 1) / kParallelElements;
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kParallelElements;
    activation_array(act, out + begin, pre + begin, std::min(kParallelElements, n - begin));
  }
}

void CpuOps::linear_bwd_f32(float* din, float* dW, float* db, const float* dout, const float* in,
                             const float* W, const float* pre_act, float* dpre_scratch, int64_t M,
                             int K, int N, Activation act, bool accumulate_din) {
  if (M == 0) return;
  const float* dpre = dout;  // [M, N]
  if (act != Activation::none) {
#pragma omp parallel for num_threads(threads_) if (M * N > kParallelElements)
    for (int64_t i = 0; i < M; ++i) {
      activation_grad_array(act, dpre_scratch + i * N, dout + i * N, pre_act + i * N, N);
    }
    dpre = dpre_scratch;
  }
  if (db != nullptr) {
    const int blocks = (N + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (M * N > kParallelElements)
    for (int blk = 0; blk < blocks; ++blk) {
      const int c0 = blk * kColumnBlock, c1 = std::min(N, c0 + kColumnBlock);
      double acc[kColumnBlock] = {};
      for (int64_t i = 0; i < M; ++i) {
        const float* row = dpre + i * N;
        for (int j = c0; j < c1; ++j) acc[j - c0] += row[j];
      }
      for (int j = c0; j < c1; ++j) db[j] += static_cast<float>(acc[j - c0]);
    }
  }
  // dW[N,K] += dpreᵀ[N,M] · in[M,K];  din[M,K] (+)= dpre[M,N] · W[N,K].
  const float din_beta = accumulate_din ? 1.0f : 0.0f;
  if (bf16_gemm_inputs_) {  // dpre converted once for both products
    const GemmOperand<uint16_t> dpre16 = bf16_operand({dpre, N, false}, M, N, bf16_a_);
    if (dW != nullptr) linear_gemm(N, K, M, {dpre16.data, dpre16.ld, true}, {in, K, false}, 1.0f, dW, K);
    if (din != nullptr) linear_gemm(M, K, N, dpre16, {W, K, false}, din_beta, din, K);
    return;
  }
  if (dW != nullptr) linear_gemm(N, K, M, {dpre, N, true}, {in, K, false}, 1.0f, dW, K);
  if (din != nullptr) linear_gemm(M, K, N, {dpre, N, false}, {W, K, false}, din_beta, din, K);
}

}  // namespace bert
