// LayerNorm forward/backward with fp32 statistics: one block per row for the forward and the
// input gradient; dgamma/dbeta are reduced over fixed row chunks into double partials and then
// summed per column in chunk order (deterministic, same formulas as the CPU reference).
#include "kernels/layernorm.h"
#include "common.cuh"

namespace bert::kernels {
namespace {

constexpr int kRowsPerChunk = 64;
constexpr int kColTile = 32;
constexpr int kRowLanes = 8;

__global__ void layernorm_fwd_kernel(float* out, float* mean, float* rstd, const float* in,
                                     const float* gamma, const float* beta, int N, float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const float* x = in + row * N;  // [N]
  float* y = out + row * N;       // [N]
  float sum = 0.0f;
  for (int j = threadIdx.x; j < N; j += blockDim.x) sum += x[j];
  const float mu = block_sum(sum, shared) / N;
  float sq = 0.0f;
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    const float d = x[j] - mu;
    sq += d * d;
  }
  const float rs = 1.0f / sqrtf(block_sum(sq, shared) / N + eps);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
  for (int j = threadIdx.x; j < N; j += blockDim.x) y[j] = (x[j] - mu) * rs * gamma[j] + beta[j];
}

// din = rstd · (g - mean(g) - x̂ · mean(g ⊙ x̂)) with g = dout ⊙ gamma.
__global__ void layernorm_bwd_input_kernel(float* din, const float* dout, const float* in,
                                           const float* mean, const float* rstd,
                                           const float* gamma, int N) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const float* x = in + row * N;
  const float* dy = dout + row * N;
  float* dx = din + row * N;
  const float mu = mean[row], rs = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    const float g = dy[j] * gamma[j];
    sum_g += g;
    sum_gx += g * ((x[j] - mu) * rs);
  }
  const float mean_g = block_sum(sum_g, shared) / N;
  const float mean_gx = block_sum(sum_gx, shared) / N;
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    const float g = dy[j] * gamma[j];
    const float xhat = (x[j] - mu) * rs;
    dx[j] = rs * (g - mean_g - xhat * mean_gx);
  }
}

// Block (32 columns × 8 row lanes) for column tile blockIdx.x and row chunk blockIdx.y writes
// partials[chunk][col] (dgamma part) and partials[chunk][N + col] (dbeta part).
__global__ void layernorm_param_partials_kernel(double* partials, const float* dout,
                                                const float* in, const float* mean,
                                                const float* rstd, int64_t M, int N) {
  __shared__ double s_gamma[kRowLanes][kColTile + 1];
  __shared__ double s_beta[kRowLanes][kColTile + 1];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * kRowsPerChunk;
  const int64_t r1 = min(M, r0 + kRowsPerChunk);
  double acc_gamma = 0.0, acc_beta = 0.0;
  if (col < N) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const float dy = dout[r * N + col];
      const float xhat = (in[r * N + col] - mean[r]) * rstd[r];
      acc_gamma += static_cast<double>(dy) * xhat;
      acc_beta += dy;
    }
  }
  s_gamma[threadIdx.y][threadIdx.x] = acc_gamma;
  s_beta[threadIdx.y][threadIdx.x] = acc_beta;
  __syncthreads();
  if (threadIdx.y == 0 && col < N) {
    double g = 0.0, b = 0.0;
    for (int k = 0; k < kRowLanes; ++k) {
      g += s_gamma[k][threadIdx.x];
      b += s_beta[k][threadIdx.x];
    }
    partials[chunk * 2 * N + col] = g;
    partials[chunk * 2 * N + N + col] = b;
  }
}

__global__ void layernorm_param_finish_kernel(float* dgamma, float* dbeta, const double* partials,
                                              int chunks, int N) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= N) return;
  double g = 0.0, b = 0.0;
  for (int c = 0; c < chunks; ++c) {
    g += partials[static_cast<int64_t>(c) * 2 * N + col];
    b += partials[static_cast<int64_t>(c) * 2 * N + N + col];
  }
  dgamma[col] += static_cast<float>(g);
  dbeta[col] += static_cast<float>(b);
}

int threads_for_row(int N) { return N >= 512 ? 256 : (N >= 128 ? 128 : 32); }

}  // namespace

void layernorm_fwd(float* out, float* mean, float* rstd, const float* in, const float* gamma,
                   const float* beta, int64_t M, int N, float eps, cudaStream_t stream) {
  if (M == 0) return;
  BERT_CHECK(M <= 0x7fffffff, Code::invalid_argument, "layernorm_fwd: ", M, " rows is too many");
  layernorm_fwd_kernel<<<static_cast<unsigned>(M), threads_for_row(N), 0, stream>>>(
      out, mean, rstd, in, gamma, beta, N, eps);
  CUDA_CHECK(cudaGetLastError());
}

void layernorm_bwd_input(float* din, const float* dout, const float* in, const float* mean,
                         const float* rstd, const float* gamma, int64_t M, int N,
                         cudaStream_t stream) {
  if (M == 0) return;
  BERT_CHECK(M <= 0x7fffffff, Code::invalid_argument, "layernorm_bwd: ", M, " rows is too many");
  layernorm_bwd_input_kernel<<<static_cast<unsigned>(M), threads_for_row(N), 0, stream>>>(
      din, dout, in, mean, rstd, gamma, N);
  CUDA_CHECK(cudaGetLastError());
}

int layernorm_param_chunks(int64_t M) {
  return static_cast<int>(ceil_div(M < 1 ? 1 : M, kRowsPerChunk));
}

void layernorm_bwd_params(float* dgamma, float* dbeta, const float* dout, const float* in,
                          const float* mean, const float* rstd, int64_t M, int N,
                          double* partials, cudaStream_t stream) {
  if (M == 0) return;
  const int chunks = layernorm_param_chunks(M);
  const dim3 grid(static_cast<unsigned>(ceil_div(N, kColTile)), static_cast<unsigned>(chunks));
  layernorm_param_partials_kernel<<<grid, dim3(kColTile, kRowLanes), 0, stream>>>(
      partials, dout, in, mean, rstd, M, N);
  CUDA_CHECK(cudaGetLastError());
  layernorm_param_finish_kernel<<<static_cast<unsigned>(ceil_div(N, kThreads)), kThreads, 0,
                                  stream>>>(dgamma, dbeta, partials, chunks, N);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
