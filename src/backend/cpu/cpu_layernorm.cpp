// LayerNorm on the CPU: per-row statistics in double with two passes (mean, then biased
// variance), saved as float mean/rstd; the backward recomputes x̂ from them. Row sums run in
// interleaved double lanes (cpu_lane_reduce.h: vectorisable, the same bits for any thread
// count); the row kernels are compiled for the instruction sets of cpu_isa.h and
// picked at run time (target_clones). dgamma/dbeta are reduced over rows in a fixed order per
// column block, so they do not depend on the thread count either.
// The residual block (residual_layernorm_*) runs one row at a time: the dropout + residual add
// (the same Philox uniforms and float expressions as cpu_dropout.cpp) and the normalisation meet
// while the row is in L1; its backward accumulates dgamma/dbeta in double per fixed chunk of
// rows, then sums the chunks in order (thread-count independent, as above).
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_lane_reduce.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_philox.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kColumnBlock = 32;

BERT_CPU_CLONES
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
BERT_CPU_CLONES
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
BERT_CPU_CLONES
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

// Rows per chunk of the residual block's parameter-gradient partials.
constexpr int64_t kRowsPerChunk = 32;

// layernorm_row_bwd's dx into d_res (which may alias dy), and acc_gamma[j] += dy ⊙ x̂,
// acc_beta[j] += dy on the way (each dy is read before d_res overwrites it).
BERT_CPU_CLONES
void residual_layernorm_row_bwd(float* d_res, double* acc_gamma, double* acc_beta, const float* dy, const float* x,
                                double mu, double rs, const float* gamma, int N) {
  const double sum_g = lane_sum(N, [&](int64_t j) { return static_cast<double>(dy[j]) * gamma[j]; });
  const double sum_gx = lane_sum(N, [&](int64_t j) { return static_cast<double>(dy[j]) * gamma[j] * ((x[j] - mu) * rs); });
  const double mean_g = sum_g / N, mean_gx = sum_gx / N;
  for (int j = 0; j < N; ++j) {
    const float dyj = dy[j];
    const double g = static_cast<double>(dyj) * gamma[j];
    const double xhat = (x[j] - mu) * rs;
    acc_gamma[j] += dyj * xhat;
    acc_beta[j] += dyj;
    d_res[j] = static_cast<float>(rs * (g - mean_g - xhat * mean_gx));
  }
}

}  // namespace

void CpuOps::residual_layernorm_fwd_impl(const ResidualLayernormFwdArgs& a) {
  float* out = a.out.f32();
  float* res = a.res.f32();
  const float* in = a.in.f32();
  const float* residual = a.residual.f32();
#pragma omp parallel for num_threads(threads_) if (a.M * a.N > kParallelElements)
  for (int64_t i = 0; i < a.M; ++i) {
    dropout_apply(res + i * a.N, in + i * a.N, residual + i * a.N, a.site, i * a.N, a.N);
    layernorm_row_fwd(out + i * a.N, a.mean + i, a.rstd + i, res + i * a.N, a.gamma, a.beta, a.N, a.eps);
  }
}

void CpuOps::residual_layernorm_bwd_impl(const ResidualLayernormBwdArgs& a) {
  float* d_in = a.d_in.f32();
  float* d_residual = a.d_residual.f32();
  const float* dout = a.dout.f32();
  const float* res = a.res.f32();
  const int64_t chunks = (a.M + kRowsPerChunk - 1) / kRowsPerChunk;
  layernorm_partials_.resize(std::max<size_t>(layernorm_partials_.size(), static_cast<size_t>(chunks) * 2 * a.N));
  double* partials = layernorm_partials_.data();  // [chunks][2N]: dgamma part | dbeta part
#pragma omp parallel for num_threads(threads_) if (a.M * a.N > kParallelElements)
  for (int64_t c = 0; c < chunks; ++c) {
    double* acc = partials + c * 2 * a.N;
    std::fill(acc, acc + 2 * a.N, 0.0);
    for (int64_t i = c * kRowsPerChunk; i < std::min(a.M, (c + 1) * kRowsPerChunk); ++i) {
      residual_layernorm_row_bwd(d_residual + i * a.N, acc, acc + a.N, dout + i * a.N, res + i * a.N, a.mean[i], a.rstd[i], a.gamma,
                                 a.N);
      dropout_apply(d_in + i * a.N, d_residual + i * a.N, nullptr, a.site, i * a.N, a.N);
    }
  }
  for (int j = 0; j < a.N; ++j) {
    double g = 0.0, b = 0.0;
    for (int64_t c = 0; c < chunks; ++c) {
      g += partials[c * 2 * a.N + j];
      b += partials[c * 2 * a.N + a.N + j];
    }
    a.dgamma[j] += static_cast<float>(g);
    a.dbeta[j] += static_cast<float>(b);
  }
}

void CpuOps::layernorm_fwd_impl(const LayernormFwdArgs& a) {
  float* out = a.out.f32();
  const float* in = a.in.f32();
#pragma omp parallel for num_threads(threads_) if (a.M * a.N > kParallelElements)
  for (int64_t i = 0; i < a.M; ++i) layernorm_row_fwd(out + i * a.N, a.mean + i, a.rstd + i, in + i * a.N, a.gamma, a.beta, a.N, a.eps);
}

void CpuOps::layernorm_bwd_impl(const LayernormBwdArgs& a) {
  float* din = a.din.f32();
  const float* dout = a.dout.f32();
  const float* in = a.in.f32();
#pragma omp parallel for num_threads(threads_) if (a.M * a.N > kParallelElements)
  for (int64_t i = 0; i < a.M; ++i) layernorm_row_bwd(din + i * a.N, dout + i * a.N, in + i * a.N, a.mean[i], a.rstd[i], a.gamma, a.N);
  const int blocks = (a.N + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (a.M * a.N > kParallelElements)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock;
    layernorm_columns_bwd(a.dgamma, a.dbeta, dout, in, a.mean, a.rstd, a.M, a.N, c0, std::min(a.N, c0 + kColumnBlock));
  }
}

}  // namespace bert
