// Launchers of kernels/activation.cu: the activations (GELU erf/tanh, tanh) and their gradients.
// Out = act(pre); dpre = dout ⊙ act'(pre) (n elements).
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/op_params.h"

namespace bert::kernels {

void activation_fwd(float* out, const float* pre, int64_t n, Activation act, cudaStream_t stream);
void activation_bwd(float* dpre, const float* dout, const float* pre, int64_t n, Activation act,
                    cudaStream_t stream);

}  // namespace bert::kernels
