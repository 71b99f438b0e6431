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

// Adam's moments and direction for element i: g = grad·grad_scale, m and v updated in place,
// update = (m/bc1) / (sqrt(v/bc2) + eps) + wd·param; returns the update.
struct AdamElement {
  float* update;
  float* m;
  float* v;
  const float* grad;
  const float* param;
  float b1, b2, one_minus_b1, one_minus_b2, bc1, bc2, eps, grad_scale, wd;

  AdamElement(float* update, float* m, float* v, const float* grad, const float* param, const AdamStepArgs& args,
              float wd)
      : update(update), m(m), v(v), grad(grad), param(param), b1(args.beta1), b2(args.beta2),
        one_minus_b1(1.0f - args.beta1), one_minus_b2(1.0f - args.beta2), bc1(args.bias_correction1),
        bc2(args.bias_correction2), eps(args.eps), grad_scale(args.grad_scale), wd(wd) {}

  __attribute__((always_inline)) float operator()(int64_t i) const {
    const float g = grad[i] * grad_scale;
    const float mi = b1 * m[i] + one_minus_b1 * g;
    const float vi = b2 * v[i] + one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float u = (mi / bc1) / (std::sqrt(vi / bc2) + eps) + wd * param[i];
    update[i] = u;
    return u;
  }
};

// AdamElement over [begin, end). By value: a local copy's scalars cannot alias the arrays it
// writes, so the loop vectorises.
BERT_CPU_CLONES_EXACT
void adam_chunk(const AdamElement adam, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) adam(i);
}

// AdamElement over [begin, end) with LAMB's Σ param² and Σ update² of the chunk in the same loop,
// each summed as sumsq_chunk sums (lane_sum's lanes and tree), so bit for bit the same: one pass
// over the chunk instead of three (the direction of a bert-base step: 114 -> 102-104 ms on 2
// threads of a Xeon VM).
BERT_CPU_CLONES_EXACT
void adam_chunk_with_sums(const AdamElement adam, int64_t begin, int64_t end, double* param_sumsq,
                          double* update_sumsq) {
  double p_lane[kLanes] = {}, u_lane[kLanes] = {};
  const auto element = [&](int64_t i, int lane) {
    const double p = adam.param[i], u = adam(i);
    p_lane[lane] += p * p;
    u_lane[lane] += u * u;
  };
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) element(i + l, l);
  }
  for (int l = 0; i < end; ++i, ++l) element(i, l);
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
    const AdamElement adam(a.update, a.m, a.v, a.grad, a.param, a.args, seg.weight_decay);
    if (a.host_sumsq) {
      adam_chunk_with_sums(adam, seg.offset + k.begin, seg.offset + k.end, &sumsq_partials_[c],
                           &sumsq_partials_[total_chunks + c]);
    } else {
      adam_chunk(adam, seg.offset + k.begin, seg.offset + k.end);
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
