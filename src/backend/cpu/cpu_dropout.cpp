// Dropout on the CPU: dropout (+ residual) forward and dropout backward, with masks drawn by the
// vectorised Philox of cpu_philox.h. Work is split into fixed chunks whose size is a multiple of
// 4, so each Philox block is drawn by one thread.
#include <algorithm>

#include "backend/cpu/cpu_philox.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int64_t kChunk = kParallelElements;

int64_t chunks_of(int64_t n) { return (n + kChunk - 1) / kChunk; }

}  // namespace

void CpuOps::dropout_residual_fwd_impl(const DropoutResidualFwdArgs& a) {
  float* out = a.out.f32();
  const float* in = a.in.f32();
  const float* residual = a.residual.f32();
  const float keep_scale = dropout_keep_scale(a.site);
  const int64_t chunks = chunks_of(a.n);
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(a.n, begin + kChunk);
    if (a.site.p == 0.0f) {
      for (int64_t i = begin; i < end; ++i) out[i] = residual ? in[i] + residual[i] : in[i];
      continue;
    }
    for_each_dropout_uniform(a.site, begin, end, [&](int64_t i, float u) {
      const float dropped = u >= a.site.p ? in[i] * keep_scale : 0.0f;
      out[i] = residual ? dropped + residual[i] : dropped;
    });
  }
}

void CpuOps::dropout_bwd_impl(const DropoutBwdArgs& a) {
  float* din = a.din.f32();
  const float* dout = a.dout.f32();
  if (a.site.p == 0.0f) {
    if (din != dout) copy(din, dout, static_cast<size_t>(a.n) * sizeof(float));
    return;
  }
  const float keep_scale = dropout_keep_scale(a.site);
  const int64_t chunks = chunks_of(a.n);
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(a.n, begin + kChunk);
    for_each_dropout_uniform(a.site, begin, end, [&](int64_t i, float u) {
      din[i] = u >= a.site.p ? dout[i] * keep_scale : 0.0f;
    });
  }
}

}  // namespace bert
