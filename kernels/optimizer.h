// Launchers of kernels/optimizer.cu: the multi-tensor Adam direction, the update and scaling, and
// the scalars of a device-resident optimizer step.
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
// With `state` (a device-resident step, Ops::optimizer_step) adam_direction takes state->adam
// instead of `args`, and both do nothing when state->skipped.
void adam_direction(float* update, float* m, float* v, const float* grad, const float* param,
                    const SegmentTable& table, const AdamStepArgs& args, double* sumsq_partials,
                    cudaStream_t stream, const OptimizerStepState* state = nullptr);
void apply_update(float* param, const float* update, const SegmentTable& table,
                  cudaStream_t stream, const OptimizerStepState* state = nullptr);
void scale(float* x, float a, int64_t n, cudaStream_t stream);

// A device-resident step's scalars: derive_step_scalars(*state, grad_sumsq, segments) in one thread.
void derive_step_scalars(OptimizerStepState* state, const double* grad_sumsq, int segments, cudaStream_t stream);
// scale[s] = update_scale(state->lr, sums[s], sums[segments + s], trust_ratio_applies(trust,
// weight_decay[s])) (sums: Σ param² then Σ update² per segment; unread for TrustRatio::none).
void update_scales(float* scale, const double* sums, const float* weight_decay, int segments, TrustRatio trust,
                   const OptimizerStepState* state, cudaStream_t stream);

}  // namespace bert::kernels
