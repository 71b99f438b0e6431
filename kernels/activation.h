// Launchers of kernels/activation.cu: the activations (GELU erf/tanh, tanh) and their gradients.
// Out = act(pre); dpre = dout ⊙ act'(pre) (n elements), all tensors of one storage type.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"
#include "core/op_params.h"

namespace bert::kernels {

void activation_fwd(Act out, ConstAct pre, int64_t n, Activation act, cudaStream_t stream);
void activation_bwd(Act dpre, ConstAct dout, ConstAct pre, int64_t n, Activation act, cudaStream_t stream);

}  // namespace bert::kernels
