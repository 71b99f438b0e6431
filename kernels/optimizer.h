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

// With sumsq_partials ([2, chunks] doubles) the same pass writes each chunk's Σ param² and
// Σ update² (the block sums segment_sumsq makes) for segment_partials_finish(..., 2, ...).
void adam_direction(float* update, float* m, float* v, const float* grad, const float* param,
                    const SegmentTable& table, const AdamStepArgs& args, double* sumsq_partials,
                    cudaStream_t stream);
void apply_update(float* param, const float* update, const SegmentTable& table,
                  cudaStream_t stream);
void scale(float* x, float a, int64_t n, cudaStream_t stream);

}  // namespace bert::kernels
