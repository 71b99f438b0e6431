// Launchers of kernels/dropout.cu: dropout (Philox masks, as the CPU draws them), fused with the
// residual add. Element i uses Philox index index_base + i; keep_scale = 1/(1-p).
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"
#include "core/op_params.h"

namespace bert::kernels {

// out = dropout(in) + residual (residual may be null); out may alias in. One storage type.
void dropout_residual_fwd(Act out, ConstAct in, ConstAct residual, int64_t n, const DropoutSite& site,
                          float keep_scale, int64_t index_base, cudaStream_t stream);
// din = dout ⊙ mask · keep_scale; din may alias dout.
void dropout_bwd(Act din, ConstAct dout, int64_t n, const DropoutSite& site, float keep_scale,
                 cudaStream_t stream);

}  // namespace bert::kernels
