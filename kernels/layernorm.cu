// LayerNorm forward/backward with fp32 statistics: one block per row for the forward and the
// input gradient; dgamma/dbeta are reduced over fixed row chunks into double partials and then
// summed per column in chunk order (deterministic, same formulas as the CPU reference).
// The residual block (residual_layernorm_*): one block per row forward, one block per chunk of
// rows backward; each thread owns groups of four consecutive columns (one Philox group when the
// row starts on a multiple of four), kept in registers between the add and the normalisation
// (launched with up to 1024 threads: __launch_bounds__ keeps their registers within a block's).
// Activation tensors are of any storage type (template T); statistics, partials, gamma/beta and
// all arithmetic are fp32 (double partials), each stored value rounded once.
#include "kernels/layernorm.h"
#include "common.cuh"
#include "core/philox.h"

namespace bert::kernels {
namespace {

constexpr int kColTile = 32;
constexpr int kRowLanes = 8;
constexpr int kGroupCols = 4;                                  // columns per thread group
constexpr int kFusedMaxCols = 1024 * 4 * kGroupCols;           // 4 groups of 1024 threads

template <typename T>
__global__ void layernorm_fwd_kernel(T* out, float* mean, float* rstd, const T* in, const float* gamma,
                                     const float* beta, int N, float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const T* x = in + row * N;  // [N]
  T* y = out + row * N;       // [N]
  float sum = 0.0f;
  for (int j = threadIdx.x; j < N; j += blockDim.x) sum += load(x + j);
  const float mu = block_sum(sum, shared) / N;
  float sq = 0.0f;
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    const float d = load(x + j) - mu;
    sq += d * d;
  }
  const float rs = 1.0f / sqrtf(block_sum(sq, shared) / N + eps);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
  for (int j = threadIdx.x; j < N; j += blockDim.x) store(y + j, (load(x + j) - mu) * rs * gamma[j] + beta[j]);
}

// din = rstd · (g - mean(g) - x̂ · mean(g ⊙ x̂)) with g = dout ⊙ gamma.
template <typename T>
__global__ void layernorm_bwd_input_kernel(T* din, const T* dout, const T* in, const float* mean,
                                           const float* rstd, const float* gamma, int N) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const T* x = in + row * N;
  const T* dy = dout + row * N;
  T* dx = din + row * N;
  const float mu = mean[row], rs = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    const float g = load(dy + j) * gamma[j];
    sum_g += g;
    sum_gx += g * ((load(x + j) - mu) * rs);
  }
  const float mean_g = block_sum(sum_g, shared) / N;
  const float mean_gx = block_sum(sum_gx, shared) / N;
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    const float g = load(dy + j) * gamma[j];
    const float xhat = (load(x + j) - mu) * rs;
    store(dx + j, rs * (g - mean_g - xhat * mean_gx));
  }
}

// Block (32 columns × 8 row lanes) for column tile blockIdx.x and row chunk blockIdx.y writes
// partials[chunk][col] (dgamma part) and partials[chunk][N + col] (dbeta part).
template <typename T>
__global__ void layernorm_param_partials_kernel(double* partials, const T* dout, const T* in,
                                                const float* mean, const float* rstd, int64_t M, int N) {
  __shared__ double s_gamma[kRowLanes][kColTile + 1];
  __shared__ double s_beta[kRowLanes][kColTile + 1];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * kColumnSumRowsPerChunk;
  const int64_t r1 = min(M, r0 + kColumnSumRowsPerChunk);
  double acc_gamma = 0.0, acc_beta = 0.0;
  if (col < N) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const float dy = load(dout + r * N + col);
      const float xhat = (load(in + r * N + col) - mean[r]) * rstd[r];
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

// Uniforms of Philox indices first .. first + 3 (philox_uniform_at's), from one Philox block or
// two when `first` is not a multiple of four.
__device__ void dropout_uniforms4(float (&u)[4], const DropoutSite& site, int64_t first) {
  const uint64_t group = static_cast<uint64_t>(first) >> 2;
  const int skip = static_cast<int>(first & 3);
  const Philox4 a = philox_block(site.seed, step_of(site), site.tensor_id, group);
  const Philox4 b = skip ? philox_block(site.seed, step_of(site), site.tensor_id, group + 1) : a;
  for (int q = 0; q < 4; ++q) u[q] = philox_uniform(skip + q < 4 ? a.v[skip + q] : b.v[skip + q - 4]);
}

// The column group k of this thread starts at column (threadIdx.x + k·blockDim.x)·4.
__device__ int group_column(int k) { return (threadIdx.x + k * blockDim.x) * kGroupCols; }

// res = dropout(in) + residual (dropout_residual_fwd's bits), out = LayerNorm(res), one row per
// block; G column groups per thread.
// In 16-bit storage res is saved rounded while the statistics come from the fp32 sum.
template <int G, typename T>
__global__ void __launch_bounds__(1024) residual_layernorm_fwd_kernel(T* out, T* res, float* mean, float* rstd, const T* in,
                                              const T* residual, const float* gamma, const float* beta, int N,
                                              float eps, DropoutSite site, float keep_scale) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const int64_t base = row * N;  // Philox index of the row's first element
  float v[G][kGroupCols] = {};
  float sum = 0.0f;
  for (int k = 0; k < G; ++k) {
    const int c0 = group_column(k);
    float u[kGroupCols] = {};
    if (site.p != 0.0f && c0 < N) dropout_uniforms4(u, site, base + c0);
    for (int q = 0; q < kGroupCols; ++q) {
      const int c = c0 + q;
      if (c >= N) continue;
      const float x = load(in + base + c);
      // __fmul_rn/__fadd_rn: no FMA contraction, so res has the CPU's bits.
      const float dropped = site.p == 0.0f ? x : (u[q] >= site.p ? __fmul_rn(x, keep_scale) : 0.0f);
      v[k][q] = __fadd_rn(dropped, load(residual + base + c));
      store(res + base + c, v[k][q]);
      sum += v[k][q];
    }
  }
  const float mu = block_sum(sum, shared) / N;
  float sq = 0.0f;
  for (int k = 0; k < G; ++k) {
    for (int q = 0; q < kGroupCols; ++q) {
      const float d = v[k][q] - mu;
      if (group_column(k) + q < N) sq += d * d;
    }
  }
  const float rs = 1.0f / sqrtf(block_sum(sq, shared) / N + eps);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
  for (int k = 0; k < G; ++k) {
    for (int q = 0; q < kGroupCols; ++q) {
      const int c = group_column(k) + q;
      if (c < N) store(out + base + c, (v[k][q] - mu) * rs * gamma[c] + beta[c]);
    }
  }
}

// For the rows of chunk blockIdx.x: d_res = LayerNorm backward of dout (layernorm_bwd_input's
// formula), d_residual = d_res (may alias dout: each thread reads its columns before writing
// them), d_in = d_res ⊙ mask · keep_scale; partials[chunk] = Σ_rows (dout ⊙ x̂ | dout) in double.
template <int G, typename T>
__global__ void __launch_bounds__(1024) residual_layernorm_bwd_kernel(T* d_in, T* d_residual, double* partials, const T* dout,
                                              const T* res, const float* mean, const float* rstd,
                                              const float* gamma, int64_t M, int N, DropoutSite site,
                                              float keep_scale) {
  __shared__ float shared[32];
  const int64_t chunk = blockIdx.x;
  double acc_gamma[G][kGroupCols] = {}, acc_beta[G][kGroupCols] = {};
  const int64_t r1 = min(M, (chunk + 1) * kResidualLayerNormRowsPerChunk);
  for (int64_t row = chunk * kResidualLayerNormRowsPerChunk; row < r1; ++row) {
    const int64_t base = row * N;
    const float mu = mean[row], rs = rstd[row];
    float dy[G][kGroupCols] = {}, xhat[G][kGroupCols] = {};
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int k = 0; k < G; ++k) {
      for (int q = 0; q < kGroupCols; ++q) {
        const int c = group_column(k) + q;
        if (c >= N) continue;
        dy[k][q] = load(dout + base + c);
        xhat[k][q] = (load(res + base + c) - mu) * rs;
        const float g = dy[k][q] * gamma[c];
        sum_g += g;
        sum_gx += g * xhat[k][q];
      }
    }
    const float mean_g = block_sum(sum_g, shared) / N;
    const float mean_gx = block_sum(sum_gx, shared) / N;
    for (int k = 0; k < G; ++k) {
      const int c0 = group_column(k);
      float u[kGroupCols] = {};
      if (site.p != 0.0f && c0 < N) dropout_uniforms4(u, site, base + c0);
      for (int q = 0; q < kGroupCols; ++q) {
        const int c = c0 + q;
        if (c >= N) continue;
        const float g = dy[k][q] * gamma[c];
        const float d_res = rs * (g - mean_g - xhat[k][q] * mean_gx);
        store(d_residual + base + c, d_res);
        store(d_in + base + c, site.p == 0.0f ? d_res : (u[q] >= site.p ? __fmul_rn(d_res, keep_scale) : 0.0f));
        acc_gamma[k][q] += static_cast<double>(dy[k][q]) * xhat[k][q];
        acc_beta[k][q] += dy[k][q];
      }
    }
  }
  for (int k = 0; k < G; ++k) {
    for (int q = 0; q < kGroupCols; ++q) {
      const int c = group_column(k) + q;
      if (c >= N) continue;
      partials[chunk * 2 * N + c] = acc_gamma[k][q];
      partials[chunk * 2 * N + N + c] = acc_beta[k][q];
    }
  }
}

int threads_for_row(int N) { return N >= 512 ? 256 : (N >= 128 ? 128 : 32); }

// Column groups per thread (1, 2 or 4) and threads per block (a multiple of 32, at most 1024)
// for a residual-block row of N columns.
struct RowGroups {
  int per_thread, threads;
};
RowGroups row_groups(int N, const char* op) {
  BERT_CHECK(N <= kFusedMaxCols, Code::invalid_argument, op, ": N=", N, " columns is above the fused kernel's ",
             kFusedMaxCols);
  const int groups = static_cast<int>(ceil_div(N, kGroupCols));
  const int per_thread = groups <= 1024 ? 1 : (groups <= 2048 ? 2 : 4);
  return {per_thread, static_cast<int>(ceil_div(ceil_div(groups, per_thread), 32) * 32)};
}

}  // namespace

void layernorm_fwd(Act out, float* mean, float* rstd, ConstAct in, const float* gamma, const float* beta, int64_t M,
                   int N, float eps, cudaStream_t stream) {
  if (M == 0) return;
  BERT_CHECK(M <= 0x7fffffff, Code::invalid_argument, "layernorm_fwd: ", M, " rows is too many");
  with_storage(common_storage("layernorm_fwd", {out, in}), [&](auto tag) {
    using T = decltype(tag);
    layernorm_fwd_kernel<T><<<static_cast<unsigned>(M), threads_for_row(N), 0, stream>>>(
        typed<T>(out), mean, rstd, typed<T>(in), gamma, beta, N, eps);
  });
  CUDA_CHECK(cudaGetLastError());
}

void layernorm_bwd_input(Act din, ConstAct dout, ConstAct in, const float* mean, const float* rstd,
                         const float* gamma, int64_t M, int N, cudaStream_t stream) {
  if (M == 0) return;
  BERT_CHECK(M <= 0x7fffffff, Code::invalid_argument, "layernorm_bwd: ", M, " rows is too many");
  with_storage(common_storage("layernorm_bwd", {din, dout, in}), [&](auto tag) {
    using T = decltype(tag);
    layernorm_bwd_input_kernel<T><<<static_cast<unsigned>(M), threads_for_row(N), 0, stream>>>(
        typed<T>(din), typed<T>(dout), typed<T>(in), mean, rstd, gamma, N);
  });
  CUDA_CHECK(cudaGetLastError());
}

int layernorm_param_chunks(int64_t M) {
  return static_cast<int>(row_chunks(M, kColumnSumRowsPerChunk));
}

void layernorm_bwd_params(float* dgamma, float* dbeta, ConstAct dout, ConstAct in, const float* mean,
                          const float* rstd, int64_t M, int N, double* partials, cudaStream_t stream) {
  if (M == 0) return;
  const int chunks = layernorm_param_chunks(M);
  const dim3 grid(static_cast<unsigned>(ceil_div(N, kColTile)), static_cast<unsigned>(chunks));
  with_storage(common_storage("layernorm_bwd", {dout, in}), [&](auto tag) {
    using T = decltype(tag);
    layernorm_param_partials_kernel<T><<<grid, dim3(kColTile, kRowLanes), 0, stream>>>(
        partials, typed<T>(dout), typed<T>(in), mean, rstd, M, N);
  });
  CUDA_CHECK(cudaGetLastError());
  layernorm_param_finish_kernel<<<static_cast<unsigned>(ceil_div(N, kThreads)), kThreads, 0,
                                  stream>>>(dgamma, dbeta, partials, chunks, N);
  CUDA_CHECK(cudaGetLastError());
}

void residual_layernorm_fwd(Act out, Act res, float* mean, float* rstd, ConstAct in, ConstAct residual,
                            const float* gamma, const float* beta, int64_t M, int N, float eps,
                            const DropoutSite& site, float keep_scale, cudaStream_t stream) {
  if (M == 0) return;
  BERT_CHECK(M <= 0x7fffffff, Code::invalid_argument, "residual_layernorm_fwd: ", M, " rows is too many");
  const RowGroups rg = row_groups(N, "residual_layernorm_fwd");
  const unsigned blocks = static_cast<unsigned>(M);
  with_storage(common_storage("residual_layernorm_fwd", {out, res, in, residual}), [&](auto tag) {
    using T = decltype(tag);
    T *o = typed<T>(out), *r = typed<T>(res);
    const T *x = typed<T>(in), *skip = typed<T>(residual);
    if (rg.per_thread == 1) {
      residual_layernorm_fwd_kernel<1, T><<<blocks, rg.threads, 0, stream>>>(o, r, mean, rstd, x, skip, gamma, beta,
                                                                             N, eps, site, keep_scale);
    } else if (rg.per_thread == 2) {
      residual_layernorm_fwd_kernel<2, T><<<blocks, rg.threads, 0, stream>>>(o, r, mean, rstd, x, skip, gamma, beta,
                                                                             N, eps, site, keep_scale);
    } else {
      residual_layernorm_fwd_kernel<4, T><<<blocks, rg.threads, 0, stream>>>(o, r, mean, rstd, x, skip, gamma, beta,
                                                                             N, eps, site, keep_scale);
    }
  });
  CUDA_CHECK(cudaGetLastError());
}

int residual_layernorm_chunks(int64_t M) {
  return static_cast<int>(row_chunks(M, kResidualLayerNormRowsPerChunk));
}

void residual_layernorm_bwd(Act d_in, Act d_residual, float* dgamma, float* dbeta, ConstAct dout, ConstAct res,
                            const float* mean, const float* rstd, const float* gamma, int64_t M, int N,
                            const DropoutSite& site, float keep_scale, double* partials, cudaStream_t stream) {
  if (M == 0) return;
  const RowGroups rg = row_groups(N, "residual_layernorm_bwd");
  const int chunks = residual_layernorm_chunks(M);
  with_storage(common_storage("residual_layernorm_bwd", {d_in, d_residual, dout, res}), [&](auto tag) {
    using T = decltype(tag);
    T *dx = typed<T>(d_in), *dskip = typed<T>(d_residual);
    const T *dy = typed<T>(dout), *r = typed<T>(res);
    if (rg.per_thread == 1) {
      residual_layernorm_bwd_kernel<1, T><<<chunks, rg.threads, 0, stream>>>(dx, dskip, partials, dy, r, mean, rstd,
                                                                             gamma, M, N, site, keep_scale);
    } else if (rg.per_thread == 2) {
      residual_layernorm_bwd_kernel<2, T><<<chunks, rg.threads, 0, stream>>>(dx, dskip, partials, dy, r, mean, rstd,
                                                                             gamma, M, N, site, keep_scale);
    } else {
      residual_layernorm_bwd_kernel<4, T><<<chunks, rg.threads, 0, stream>>>(dx, dskip, partials, dy, r, mean, rstd,
                                                                             gamma, M, N, site, keep_scale);
    }
  });
  CUDA_CHECK(cudaGetLastError());
  layernorm_param_finish_kernel<<<static_cast<unsigned>(ceil_div(N, kThreads)), kThreads, 0,
                                  stream>>>(dgamma, dbeta, partials, chunks, N);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
