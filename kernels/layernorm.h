// Launchers of kernels/layernorm.cu: LayerNorm forward and backward (fixed-order parameter
// gradients).
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace bert::kernels {

void layernorm_fwd(float* out, float* mean, float* rstd, const float* in, const float* gamma,
                   const float* beta, int64_t M, int N, float eps, cudaStream_t stream);
// din (overwritten) only.
void layernorm_bwd_input(float* din, const float* dout, const float* in, const float* mean,
                         const float* rstd, const float* gamma, int64_t M, int N,
                         cudaStream_t stream);
// Number of row chunks (and [chunks, 2N] double partials) layernorm_bwd_params uses.
int layernorm_param_chunks(int64_t M);
// dgamma += Σ_rows dout ⊙ x̂, dbeta += Σ_rows dout, in a fixed order.
void layernorm_bwd_params(float* dgamma, float* dbeta, const float* dout, const float* in,
                          const float* mean, const float* rstd, int64_t M, int N,
                          double* partials, cudaStream_t stream);

}  // namespace bert::kernels
