// Multi-tensor optimizer kernels over the flat parameter buffer: the Adam direction shared by
// LAMB and AdamW (moments updated in place, fp32 master state), the per-segment scaled update,
// and a plain scale. One launch covers every segment through a chunk table (SegmentTable). A
// device-resident step (Ops::optimizer_step) adds its scalars' kernels, whose arithmetic is
// core/optimizer_math.h's, the host's.
#include "kernels/optimizer.h"
#include "common.cuh"
#include "core/optimizer_math.h"

namespace bert::kernels {
namespace {

// g = grad·grad_scale; m = β1 m + (1-β1) g; v = β2 v + (1-β2) g²;
// update = (m/bc1) / (sqrt(v/bc2) + eps) + weight_decay · param. With partials, also the chunk's
// Σ param² and Σ update² (the same per-thread order and block sum as sumsq_partials_kernel).
__global__ void adam_direction_kernel(float* update, float* m, float* v, const float* grad,
                                      const float* param, SegmentTable table, AdamStepArgs args,
                                      double* partials, const OptimizerStepState* state) {
  __shared__ double shared[32];
  if (state != nullptr) {
    if (state->skipped) return;
    args = state->adam;
  }
  const int64_t c = blockIdx.x;
  const int s = segment_of_chunk(table.chunk_start, table.segments, c);
  const int64_t begin = (c - table.chunk_start[s]) * kSegmentChunk;
  const int64_t end = min(table.size[s], begin + kSegmentChunk);
  const int64_t base = table.offset[s];
  const float wd = table.value[s];
  double p_sq = 0.0, u_sq = 0.0;
  for (int64_t i = base + begin + threadIdx.x; i < base + end; i += blockDim.x) {
    // Explicitly rounded operations (no FMA contraction) in the CPU's order: the same bits.
    const float g = __fmul_rn(grad[i], args.grad_scale);
    const float mi = __fadd_rn(__fmul_rn(args.beta1, m[i]), __fmul_rn(1.0f - args.beta1, g));
    const float vi = __fadd_rn(__fmul_rn(args.beta2, v[i]),
                               __fmul_rn(__fmul_rn(1.0f - args.beta2, g), g));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, args.bias_correction2)), args.eps);
    const double p = param[i];
    const float u = __fadd_rn(__fdiv_rn(__fdiv_rn(mi, args.bias_correction1), denom), __fmul_rn(wd, param[i]));
    update[i] = u;
    p_sq += p * p;
    u_sq += double(u) * u;
  }
  if (partials == nullptr) return;
  p_sq = block_sum(p_sq, shared);
  u_sq = block_sum(u_sq, shared);
  if (threadIdx.x == 0) {
    partials[c] = p_sq;
    partials[table.chunks + c] = u_sq;
  }
}

__global__ void apply_update_kernel(float* param, const float* update, SegmentTable table,
                                    const OptimizerStepState* state) {
  if (state != nullptr && state->skipped) return;
  const int64_t c = blockIdx.x;
  const int s = segment_of_chunk(table.chunk_start, table.segments, c);
  const int64_t begin = (c - table.chunk_start[s]) * kSegmentChunk;
  const int64_t end = min(table.size[s], begin + kSegmentChunk);
  const int64_t base = table.offset[s];
  const float scale = table.value[s];
  for (int64_t i = base + begin + threadIdx.x; i < base + end; i += blockDim.x)
    param[i] = __fsub_rn(param[i], __fmul_rn(scale, update[i]));
}

__global__ void scale_kernel(float* x, float a, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= a;
}

__global__ void derive_step_scalars_kernel(OptimizerStepState* state, const double* grad_sumsq, int segments) {
  bert::derive_step_scalars(*state, grad_sumsq, segments);
}

__global__ void update_scales_kernel(float* scale, const double* sums, const float* weight_decay, int segments,
                                     TrustRatio trust, const OptimizerStepState* state) {
  for (int s = blockIdx.x * blockDim.x + threadIdx.x; s < segments; s += gridDim.x * blockDim.x)
    scale[s] = segment_update_scale(state->lr, sums, segments, s, trust, weight_decay[s]);
}

void check_chunks(const SegmentTable& table, const char* op) {
  BERT_CHECK(table.chunks <= 0x7fffffff, Code::invalid_argument, op, ": ", table.chunks,
             " chunks is too many");
}

}  // namespace

void adam_direction(float* update, float* m, float* v, const float* grad, const float* param,
                    const SegmentTable& table, const AdamStepArgs& args, double* sumsq_partials,
                    cudaStream_t stream, const OptimizerStepState* state) {
  if (table.chunks == 0) return;
  check_chunks(table, "adam_direction");
  adam_direction_kernel<<<static_cast<unsigned>(table.chunks), kThreads, 0, stream>>>(
      update, m, v, grad, param, table, args, sumsq_partials, state);
  CUDA_CHECK(cudaGetLastError());
}

void apply_update(float* param, const float* update, const SegmentTable& table,
                  cudaStream_t stream, const OptimizerStepState* state) {
  if (table.chunks == 0) return;
  check_chunks(table, "apply_update");
  apply_update_kernel<<<static_cast<unsigned>(table.chunks), kThreads, 0, stream>>>(param, update,
                                                                                    table, state);
  CUDA_CHECK(cudaGetLastError());
}

void derive_step_scalars(OptimizerStepState* state, const double* grad_sumsq, int segments, cudaStream_t stream) {
  derive_step_scalars_kernel<<<1, 1, 0, stream>>>(state, grad_sumsq, segments);
  CUDA_CHECK(cudaGetLastError());
}

void update_scales(float* scale, const double* sums, const float* weight_decay, int segments, TrustRatio trust,
                   const OptimizerStepState* state, cudaStream_t stream) {
  if (segments == 0) return;
  update_scales_kernel<<<(segments + kThreads - 1) / kThreads, kThreads, 0, stream>>>(scale, sums, weight_decay,
                                                                                      segments, trust, state);
  CUDA_CHECK(cudaGetLastError());
}

void scale(float* x, float a, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, a, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bert::kernels
