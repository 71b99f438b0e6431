// Optimizer primitives on the CPU over segments of the flat parameter buffer: per-segment sums
// of squares (double, fixed chunking and summation order, so identical for any thread count),
// the Adam direction shared by LAMB and AdamW, the scaled parameter update, and scaling.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_lane_reduce.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int64_t kSumsqChunk = 8192;

// Σ x[i]^2 over [begin, end) in double.
double sumsq_chunk(const float* x, int64_t begin, int64_t end) {
  return lane_sum(end - begin, [&](int64_t j) {
    const double v = x[begin + j];
    return v * v;
  });
}

}  // namespace

void CpuOps::segment_sumsq_impl(double* host_out, const float* x, const std::vector<ParamSegment>& segs) {
  const size_t nseg = segs.size();
  sumsq_chunk_start_.resize(nseg + 1);
  int64_t total_chunks = 0;
  for (size_t s = 0; s < nseg; ++s) {
    sumsq_chunk_start_[s] = total_chunks;
    total_chunks += (segs[s].size + kSumsqChunk - 1) / kSumsqChunk;
  }
  sumsq_chunk_start_[nseg] = total_chunks;
  if (sumsq_partials_.size() < static_cast<size_t>(total_chunks)) sumsq_partials_.resize(total_chunks);
  const int64_t* chunk_start = sumsq_chunk_start_.data();
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads_) if (total_chunks > 1)
  for (int64_t c = 0; c < total_chunks; ++c) {
    const size_t s = static_cast<size_t>(
        std::upper_bound(chunk_start, chunk_start + nseg + 1, c) - chunk_start - 1);
    const int64_t begin = (c - chunk_start[s]) * kSumsqChunk;
    const int64_t end = std::min(segs[s].size, begin + kSumsqChunk);
    sumsq_partials_[c] = sumsq_chunk(x + segs[s].offset, begin, end);
  }
  for (size_t s = 0; s < nseg; ++s) {
    double sum = 0.0;
    for (int64_t c = chunk_start[s]; c < chunk_start[s + 1]; ++c) sum += sumsq_partials_[c];
    host_out[s] = sum;
  }
}

void CpuOps::adam_direction_impl(float* update, float* m, float* v, const float* grad,
                                 const float* param, const std::vector<ParamSegment>& segs,
                                 const AdamStepArgs& args) {
  const float b1 = args.beta1, b2 = args.beta2, one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
  const float bc1 = args.bias_correction1, bc2 = args.bias_correction2, eps = args.eps;
  const float grad_scale = args.grad_scale;
#pragma omp parallel num_threads(threads_)
  for (const ParamSegment& seg : segs) {
    const float wd = seg.weight_decay;
#pragma omp for schedule(static) nowait
    for (int64_t i = seg.offset; i < seg.offset + seg.size; ++i) {
      const float g = grad[i] * grad_scale;
      const float mi = b1 * m[i] + one_minus_b1 * g;
      const float vi = b2 * v[i] + one_minus_b2 * g * g;
      m[i] = mi;
      v[i] = vi;
      update[i] = (mi / bc1) / (std::sqrt(vi / bc2) + eps) + wd * param[i];
    }
  }
}

void CpuOps::apply_update_impl(float* param, const float* update, const std::vector<ParamSegment>& segs,
                               const std::vector<float>& host_scale) {
  BERT_CHECK(host_scale.size() == segs.size(), Code::invalid_argument, "apply_update: ",
             host_scale.size(), " scales for ", segs.size(), " segments");
#pragma omp parallel num_threads(threads_)
  for (size_t s = 0; s < segs.size(); ++s) {
    const float a = host_scale[s];
    const int64_t begin = segs[s].offset, end = segs[s].offset + segs[s].size;
#pragma omp for schedule(static) nowait
    for (int64_t i = begin; i < end; ++i) param[i] -= a * update[i];
  }
}

void CpuOps::scale_impl(float* x, float a, int64_t n) {
  const int64_t chunks = (n + kParallelElements - 1) / kParallelElements;
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kParallelElements, end = std::min(n, begin + kParallelElements);
    for (int64_t i = begin; i < end; ++i) x[i] *= a;
  }
}

}  // namespace bert
