// Dropout on the CPU: dropout (+ residual) forward and dropout backward, in fixed chunks of
// elements, each applied by cpu_philox.h's dropout_apply (the mask of an element depends only on
// its index, so not on the chunking or the thread).
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
  const int64_t chunks = chunks_of(a.n);
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(a.n, begin + kChunk);
    dropout_apply(out + begin, in + begin, residual ? residual + begin : nullptr, a.site, begin, end - begin);
  }
}

void CpuOps::dropout_bwd_impl(const DropoutBwdArgs& a) {
  float* din = a.din.f32();
  const float* dout = a.dout.f32();
  const int64_t chunks = chunks_of(a.n);
#pragma omp parallel for num_threads(threads_) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(a.n, begin + kChunk);
    dropout_apply(din + begin, dout + begin, nullptr, a.site, begin, end - begin);
  }
}

}  // namespace bert
