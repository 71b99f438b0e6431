// Launchers of kernels/softmax_xent.cu: softmax cross-entropy fused with its gradient.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"
#include "core/op_params.h"

namespace bert::kernels {

// label_status [4] (device): [0] += the number of labels >= V; when [0] was 0 before, [1..3]
// receive the first such row, its label and V. Those rows' outputs are undefined. logits and
// dlogits (may alias) share one storage type; losses are fp32.
void softmax_xent(Act dlogits, float* losses, int32_t* correct, ConstAct logits, const int32_t* labels, int64_t M,
                  int V, int ld, ScaleArg grad_scale, int32_t* label_status, cudaStream_t stream);

}  // namespace bert::kernels
