// Optimizer primitives on the CPU over segments of the flat parameter buffer: per-segment sums
// of squares (double, fixed chunking and summation order, so identical for any thread count),
// the Adam direction shared by LAMB and AdamW (with LAMB's sums of squares from the same pass),
// the scaled parameter update, scaling, and a whole step with its scalars in (host) backend memory.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_lane_reduce.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/optimizer_math.h"

namespace bert {
namespace {

constexpr int64_t kSumsqChunk = 8192;

// Σ x[i]^2 over [begin, end) in double, as lane_sum sums it, with x prefetched 4 KiB ahead once
// per round of the lanes (the hardware prefetcher alone left this read at 60% of a plain float
// loop's bandwidth on a 2-core Xeon VM). The prefetch sits outside the lanes' loop: a branch on
// the cache line inside it kept the loop scalar, and bert-large's Σ grad² took 100 ms of a step
// on one thread of an AMD EPYC (Zen 4), 51 ms this way.
BERT_CPU_CLONES_EXACT
double sumsq_chunk(const float* x, int64_t begin, int64_t end) {
  constexpr int64_t kAhead = 1024;  // floats
  const float* chunk = x + begin;
  const int64_t n = end - begin, rounds = n / kLanes * kLanes;
  double lane[kLanes] = {};
  for (int64_t j = 0; j < rounds; j += kLanes) {
    __builtin_prefetch(chunk + j + kAhead);
    for (int l = 0; l < kLanes; ++l) {
      const double v = chunk[j + l];
      lane[l] += v * v;
    }
  }
  lane_accumulate(lane, n - rounds, [&](int64_t j) {
    const double v = chunk[rounds + j];
    return v * v;
  });
  return lane_total(lane);
}

// Adam's scalars for one segment, and the moments and direction of one element.
struct AdamScalars {
  float b1, b2, one_minus_b1, one_minus_b2, bc1, bc2, eps, grad_scale, wd;

  AdamScalars(const AdamStepArgs& args, float wd)
      : b1(args.beta1), b2(args.beta2), one_minus_b1(1.0f - args.beta1), one_minus_b2(1.0f - args.beta2),
        bc1(args.bias_correction1), bc2(args.bias_correction2), eps(args.eps), grad_scale(args.grad_scale), wd(wd) {}

  // g = grad·grad_scale, m and v updated in place; returns the update
  // (m/bc1) / (sqrt(v/bc2) + eps) + wd·param.
  __attribute__((always_inline)) float step(float grad, float& m, float& v, float param) const {
    const float g = grad * grad_scale;
    m = b1 * m + one_minus_b1 * g;
    v = b2 * v + one_minus_b2 * g * g;
    return (m / bc1) / (std::sqrt(v / bc2) + eps) + wd * param;
  }
};

// The Adam direction over n elements. The arrays come in as restrict-qualified parameters (here
// and in adam_lanes_with_sums): read through a struct's pointers, the loops were versioned for
// aliasing with a run-time check on every round of lanes.
BERT_CPU_CLONES_EXACT
void adam_chunk(const AdamScalars s, float* __restrict update, float* __restrict m, float* __restrict v,
                const float* __restrict grad, const float* __restrict param, int64_t n) {
  for (int64_t i = 0; i < n; ++i) update[i] = s.step(grad[i], m[i], v[i], param[i]);
}

// The Adam direction over count ≤ kLanes elements, with param² and update² added to lane l for
// element l.
__attribute__((always_inline)) inline void adam_lanes_with_sums(
    const AdamScalars& s, float* __restrict update, float* __restrict m, float* __restrict v,
    const float* __restrict grad, const float* __restrict param, int count, double* __restrict p_lane,
    double* __restrict u_lane) {
  for (int l = 0; l < count; ++l) {
    const float u = s.step(grad[l], m[l], v[l], param[l]);
    update[l] = u;
    const double p = param[l], ud = u;
    p_lane[l] += p * p;
    u_lane[l] += ud * ud;
  }
}

// The Adam direction over n elements with LAMB's Σ param² and Σ update² of the chunk in the same
// loop, each summed as sumsq_chunk sums (lane_accumulate's lanes, lane_total's tree), so bit for
// bit the same: one pass over the chunk instead of three (the direction of a bert-base step:
// 114 -> 102-104 ms on 2 threads of a Xeon VM). With restrict-qualified rounds, 64 Mi elements
// on one thread of an AMD EPYC (Zen 4) took 70 ms instead of 88 (57 without the sums).
BERT_CPU_CLONES_EXACT
void adam_chunk_with_sums(const AdamScalars s, float* __restrict update, float* __restrict m, float* __restrict v,
                          const float* __restrict grad, const float* __restrict param, int64_t n,
                          double* param_sumsq, double* update_sumsq) {
  double p_lane[kLanes] = {}, u_lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    adam_lanes_with_sums(s, update + i, m + i, v + i, grad + i, param + i, kLanes, p_lane, u_lane);
  }
  adam_lanes_with_sums(s, update + i, m + i, v + i, grad + i, param + i, static_cast<int>(n - i), p_lane, u_lane);
  *param_sumsq = lane_total(p_lane);
  *update_sumsq = lane_total(u_lane);
}

}  // namespace

int64_t CpuOps::plan_sumsq_chunks(const std::vector<ParamSegment>& segs, int sets) {
  const size_t nseg = segs.size();
  sumsq_chunk_start_.resize(nseg + 1);
  int64_t total_chunks = 0;
  for (size_t s = 0; s < nseg; ++s) {
    sumsq_chunk_start_[s] = total_chunks;
    total_chunks += (segs[s].size + kSumsqChunk - 1) / kSumsqChunk;
  }
  sumsq_chunk_start_[nseg] = total_chunks;
  const size_t partials = static_cast<size_t>(sets * total_chunks);
  if (sumsq_partials_.size() < partials) sumsq_partials_.resize(partials);
  return total_chunks;
}

CpuOps::SumsqChunk CpuOps::sumsq_chunk_at(const std::vector<ParamSegment>& segs, int64_t c) const {
  const int64_t* chunk_start = sumsq_chunk_start_.data();
  const size_t s = static_cast<size_t>(
      std::upper_bound(chunk_start, chunk_start + segs.size() + 1, c) - chunk_start - 1);
  const int64_t begin = (c - chunk_start[s]) * kSumsqChunk;
  return {s, begin, std::min(segs[s].size, begin + kSumsqChunk)};
}

void CpuOps::finish_sumsq(double* host_out, size_t segments, int sets) const {
  const int64_t total_chunks = sumsq_chunk_start_[segments];
  for (int set = 0; set < sets; ++set) {
    const double* partials = sumsq_partials_.data() + set * total_chunks;
    for (size_t s = 0; s < segments; ++s) {
      double sum = 0.0;
      for (int64_t c = sumsq_chunk_start_[s]; c < sumsq_chunk_start_[s + 1]; ++c) sum += partials[c];
      host_out[set * segments + s] = sum;
    }
  }
}

void CpuOps::segment_sumsq_impl(const SegmentSumsqArgs& a) {
  const int64_t total_chunks = plan_sumsq_chunks(a.segs, 1);
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads_) if (total_chunks > 1)
  for (int64_t c = 0; c < total_chunks; ++c) {
    const SumsqChunk k = sumsq_chunk_at(a.segs, c);
    sumsq_partials_[c] = sumsq_chunk(a.x + a.segs[k.segment].offset, k.begin, k.end);
  }
  finish_sumsq(a.host_out, a.segs.size(), 1);
}

// In segment_sumsq's chunks, so the optional sums of squares are those segment_sumsq would give.
void CpuOps::adam_direction_impl(const AdamDirectionArgs& a) {
  const int64_t total_chunks = plan_sumsq_chunks(a.segs, a.host_sumsq ? 2 : 1);
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads_) if (total_chunks > 1)
  for (int64_t c = 0; c < total_chunks; ++c) {
    const SumsqChunk k = sumsq_chunk_at(a.segs, c);
    const ParamSegment& seg = a.segs[k.segment];
    const AdamScalars scalars(a.args, seg.weight_decay);
    const int64_t at = seg.offset + k.begin, n = k.end - k.begin;
    float *update = a.update + at, *m = a.m + at, *v = a.v + at;
    const float *grad = a.grad + at, *param = a.param + at;
    if (a.host_sumsq) {
      adam_chunk_with_sums(scalars, update, m, v, grad, param, n, &sumsq_partials_[c],
                           &sumsq_partials_[total_chunks + c]);
    } else {
      adam_chunk(scalars, update, m, v, grad, param, n);
    }
  }
  if (a.host_sumsq) finish_sumsq(a.host_sumsq, a.segs.size(), 2);
}

void CpuOps::apply_update_impl(const ApplyUpdateArgs& a) {
#pragma omp parallel num_threads(threads_)
  for (size_t s = 0; s < a.segs.size(); ++s) {
    const float scale = a.host_scale[s];
    const int64_t begin = a.segs[s].offset, end = a.segs[s].offset + a.segs[s].size;
#pragma omp for schedule(static) nowait
    for (int64_t i = begin; i < end; ++i) a.param[i] -= scale * a.update[i];
  }
}

// Backend memory is the host's here: the state is read and written in place, around the same
// primitives Optimizer::step drives.
void CpuOps::optimizer_step_impl(const OptimizerStepArgs& a) {
  const size_t S = a.segs.size();
  std::vector<double> sums(2 * S);
  segment_sumsq_impl({sums.data(), a.grad, a.segs});
  derive_step_scalars(*a.state, sums.data(), static_cast<int>(S));
  if (a.state->skipped) return;
  const bool trust_sums = a.trust != TrustRatio::none;
  adam_direction_impl({a.update, a.m, a.v, a.grad, a.param, a.segs, a.state->adam, trust_sums ? sums.data() : nullptr});
  std::vector<float> scale(S);
  for (size_t s = 0; s < S; ++s) {
    scale[s] = segment_update_scale(a.state->lr, sums.data(), static_cast<int>(S), static_cast<int>(s), a.trust,
                                    a.segs[s].weight_decay);
  }
  apply_update_impl({a.param, a.update, a.segs, scale});
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
