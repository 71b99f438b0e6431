// Launchers of kernels/optimizer.cu: the multi-tensor Adam direction, the update and scaling.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/op_params.h"
#include "kernels/reduce.h"

namespace bert::kernels {

void adam_direction(float* update, float* m, float* v, const float* grad, const float* param,
                    const SegmentTable& table, const AdamStepArgs& args, cudaStream_t stream);
void apply_update(float* param, const float* update, const SegmentTable& table,
                  cudaStream_t stream);
void scale(float* x, float a, int64_t n, cudaStream_t stream);

}  // namespace bert::kernels
