// Launchers of kernels/softmax_xent.cu: softmax cross-entropy fused with its gradient.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace bert::kernels {

void softmax_xent(float* dlogits, float* losses, int32_t* correct, const float* logits,
                  const int32_t* labels, int64_t M, int V, int ld, float grad_scale,
                  cudaStream_t stream);

}  // namespace bert::kernels
