// Launchers of kernels/layernorm.cu: LayerNorm forward and backward (fixed-order parameter
// gradients), and the residual block (dropout + residual add + LayerNorm) fused each way.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"
#include "core/op_params.h"
#include "kernels/launch_sizes.h"

namespace bert::kernels {

// The activation tensors (Act / ConstAct) of one call share one storage type; statistics
// (mean, rstd), gamma, beta and their gradients are fp32.
void layernorm_fwd(Act out, float* mean, float* rstd, ConstAct in, const float* gamma, const float* beta, int64_t M,
                   int N, float eps, cudaStream_t stream);
// din (overwritten) only.
void layernorm_bwd_input(Act din, ConstAct dout, ConstAct in, const float* mean, const float* rstd,
                         const float* gamma, int64_t M, int N, cudaStream_t stream);
// Number of row chunks (and [chunks, 2N] double partials) layernorm_bwd_params uses.
int layernorm_param_chunks(int64_t M);
// dgamma += Σ_rows dout ⊙ x̂, dbeta += Σ_rows dout, in a fixed order.
void layernorm_bwd_params(float* dgamma, float* dbeta, ConstAct dout, ConstAct in, const float* mean,
                          const float* rstd, int64_t M, int N, double* partials, cudaStream_t stream);

// res = dropout(in) + residual (element i of the row-major [M,N] uses Philox index i;
// keep_scale = 1/(1-p)), out = LayerNorm(res) with mean/rstd saved. N ≤ 16384.
void residual_layernorm_fwd(Act out, Act res, float* mean, float* rstd, ConstAct in, ConstAct residual,
                            const float* gamma, const float* beta, int64_t M, int N, float eps,
                            const DropoutSite& site, float keep_scale, cudaStream_t stream);
// Number of row chunks (and [chunks, 2N] double partials) residual_layernorm_bwd uses.
int residual_layernorm_chunks(int64_t M);
// d_residual = LayerNorm backward of dout (may alias dout), d_in = d_residual ⊙ mask ·
// keep_scale; dgamma += Σ_rows dout ⊙ x̂, dbeta += Σ_rows dout, in a fixed order.
void residual_layernorm_bwd(Act d_in, Act d_residual, float* dgamma, float* dbeta, ConstAct dout, ConstAct res,
                            const float* mean, const float* rstd, const float* gamma, int64_t M, int N,
                            const DropoutSite& site, float keep_scale, double* partials, cudaStream_t stream);

}  // namespace bert::kernels
