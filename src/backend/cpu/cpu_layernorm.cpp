// LayerNorm on the CPU: per-row statistics in double with two passes (mean, then biased
// variance), saved as float mean/rstd; the backward recomputes x̂ from them. Row sums run in
// interleaved double lanes (cpu_lane_reduce.h: vectorisable, the same bits for any thread
// count); the row kernels are compiled for AVX-512, AVX2 and the baseline and
// picked at run time (target_clones). dgamma/dbeta are reduced over rows in a fixed order per
// column block, so they do not depend on the thread count either.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_lane_reduce.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kColumnBlock = 32;

__attribute__((target_clones("avx512f", "avx2", "default")))
void layernorm_row_fwd(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                       int N, float eps) {
  const double mu = lane_sum(N, [&](int64_t j) { return static_cast<double>(x[j]); }) / N;
  const double sq = lane_sum(N, [&](int64_t j) {
    const double d = x[j] - mu;
    return d * d;
  });
  const double rs = 1.0 / std::sqrt(sq / N + static_cast<double>(eps));
  *mean = static_cast<float>(mu);
  *rstd = static_cast<float>(rs);
  for (int j = 0; j < N; ++j) {
    const float xhat = static_cast<float>((x[j] - mu) * rs);
    y[j] = xhat * gamma[j] + beta[j];
  }
}

// dx = rstd · (g - mean(g) - x̂ · mean(g ⊙ x̂)) with g = dy ⊙ gamma.
__attribute__((target_clones("avx512f", "avx2", "default")))
void layernorm_row_bwd(float* dx, const float* dy, const float* x, double mu, double rs, const float* gamma, int N) {
  const double sum_g = lane_sum(N, [&](int64_t j) { return static_cast<double>(dy[j]) * gamma[j]; });
  const double sum_gx = lane_sum(N, [&](int64_t j) { return static_cast<double>(dy[j]) * gamma[j] * ((x[j] - mu) * rs); });
  const double mean_g = sum_g / N, mean_gx = sum_gx / N;
  for (int j = 0; j < N; ++j) {
    const double g = static_cast<double>(dy[j]) * gamma[j];
    const double xhat = (x[j] - mu) * rs;
    dx[j] = static_cast<float>(rs * (g - mean_g - xhat * mean_gx));
  }
}

// dgamma[c0, c1) += Σ_rows dy ⊙ x̂, dbeta[c0, c1) += Σ_rows dy, rows in order.
__attribute__((target_clones("avx512f", "avx2", "default")))
void layernorm_columns_bwd(float* dgamma, float* dbeta, const float* dout, const float* in, const float* mean,
                           const float* rstd, int64_t M, int N, int c0, int c1) {
  double acc_gamma[kColumnBlock] = {}, acc_beta[kColumnBlock] = {};
  for (int64_t i = 0; i < M; ++i) {
    const float* x = in + i * N;
    const float* dy = dout + i * N;
    const double mu = mean[i], rs = rstd[i];
    for (int j = c0; j < c1; ++j) {
      acc_gamma[j - c0] += dy[j] * ((x[j] - mu) * rs);
      acc_beta[j - c0] += dy[j];
    }
  }
  for (int j = c0; j < c1; ++j) {
    dgamma[j] += static_cast<float>(acc_gamma[j - c0]);
    dbeta[j] += static_cast<float>(acc_beta[j - c0]);
  }
}

}  // namespace

void CpuOps::layernorm_fwd_impl(float* out, float* mean, float* rstd, const float* in,
                                const float* gamma, const float* beta, int64_t M, int N, float eps) {
  BERT_CHECK(M >= 0 && N > 0, Code::invalid_argument, "layernorm_fwd: bad shape M=", M, " N=", N);
  BERT_CHECK(eps >= 0.0f, Code::invalid_argument, "layernorm_fwd: eps ", eps, " is negative");
#pragma omp parallel for num_threads(threads_) if (M * N > kParallelElements)
  for (int64_t i = 0; i < M; ++i) layernorm_row_fwd(out + i * N, mean + i, rstd + i, in + i * N, gamma, beta, N, eps);
}

void CpuOps::layernorm_bwd_impl(float* din, float* dgamma, float* dbeta, const float* dout,
                                const float* in, const float* mean, const float* rstd,
                                const float* gamma, int64_t M, int N) {
  BERT_CHECK(M >= 0 && N > 0, Code::invalid_argument, "layernorm_bwd: bad shape M=", M, " N=", N);
#pragma omp parallel for num_threads(threads_) if (M * N > kParallelElements)
  for (int64_t i = 0; i < M; ++i) layernorm_row_bwd(din + i * N, dout + i * N, in + i * N, mean[i], rstd[i], gamma, N);
  const int blocks = (N + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (M * N > kParallelElements)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock;
    layernorm_columns_bwd(dgamma, dbeta, dout, in, mean, rstd, M, N, c0, std::min(N, c0 + kColumnBlock));
  }
}

}  // namespace bert
