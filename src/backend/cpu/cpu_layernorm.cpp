// LayerNorm on the CPU: per-row statistics in double with two passes (mean, then biased
// variance), saved as float mean/rstd; the backward recomputes x̂ from them. dgamma/dbeta are
// reduced over rows in a fixed order per column block, so they do not depend on thread count.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kColumnBlock = 32;

}  // namespace

void CpuOps::layernorm_fwd(float* out, float* mean, float* rstd, const float* in,
                           const float* gamma, const float* beta, int64_t M, int N, float eps) {
  BERT_CHECK(M >= 0 && N > 0, Code::invalid_argument, "layernorm_fwd: bad shape M=", M, " N=", N);
  BERT_CHECK(eps >= 0.0f, Code::invalid_argument, "layernorm_fwd: eps ", eps, " is negative");
#pragma omp parallel for num_threads(threads_) if (M * N > 16384)
  for (int64_t i = 0; i < M; ++i) {
    const float* x = in + i * N;  // [N]
    float* y = out + i * N;       // [N]
    double sum = 0.0;
    for (int j = 0; j < N; ++j) sum += x[j];
    const double mu = sum / N;
    double sq = 0.0;
    for (int j = 0; j < N; ++j) {
      const double d = x[j] - mu;
      sq += d * d;
    }
    const double rs = 1.0 / std::sqrt(sq / N + static_cast<double>(eps));
    mean[i] = static_cast<float>(mu);
    rstd[i] = static_cast<float>(rs);
    for (int j = 0; j < N; ++j) {
      const float xhat = static_cast<float>((x[j] - mu) * rs);
      y[j] = xhat * gamma[j] + beta[j];
    }
  }
}

void CpuOps::layernorm_bwd(float* din, float* dgamma, float* dbeta, const float* dout,
                           const float* in, const float* mean, const float* rstd,
                           const float* gamma, int64_t M, int N) {
  BERT_CHECK(M >= 0 && N > 0, Code::invalid_argument, "layernorm_bwd: bad shape M=", M, " N=", N);
  // din = rstd · (g - mean(g) - x̂ · mean(g ⊙ x̂)) with g = dout ⊙ gamma, per row.
#pragma omp parallel for num_threads(threads_) if (M * N > 16384)
  for (int64_t i = 0; i < M; ++i) {
    const float* x = in + i * N;
    const float* dy = dout + i * N;
    float* dx = din + i * N;
    const double mu = mean[i], rs = rstd[i];
    double sum_g = 0.0, sum_gx = 0.0;
    for (int j = 0; j < N; ++j) {
      const double g = static_cast<double>(dy[j]) * gamma[j];
      sum_g += g;
      sum_gx += g * ((x[j] - mu) * rs);
    }
    const double mean_g = sum_g / N, mean_gx = sum_gx / N;
    for (int j = 0; j < N; ++j) {
      const double g = static_cast<double>(dy[j]) * gamma[j];
      const double xhat = (x[j] - mu) * rs;
      dx[j] = static_cast<float>(rs * (g - mean_g - xhat * mean_gx));
    }
  }
  const int blocks = (N + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (M * N > 16384)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock, c1 = std::min(N, c0 + kColumnBlock);
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
}

}  // namespace bert
