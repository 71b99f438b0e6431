// Row gathers and scatter-adds on the CPU (the pretraining heads' masked rows, the pooled [CLS]
// rows). The scatter splits the columns among threads and walks the rows in order, so repeated
// rows sum in a fixed order (identical results for any thread count).
#include <algorithm>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kColumnBlock = 128;

}  // namespace

void CpuOps::gather_rows_impl(const GatherRowsArgs& a) {
  float* out = a.out.f32();
  const float* in = a.in.f32();
#pragma omp parallel for num_threads(threads_) if (a.n * a.H > kParallelElements)
  for (int64_t i = 0; i < a.n; ++i) {
    std::copy_n(in + static_cast<int64_t>(a.rows[i]) * a.H, a.H, out + i * a.H);
  }
}

void CpuOps::scatter_add_rows_impl(const ScatterAddRowsArgs& a) {
  float* dst = a.dst.f32();
  const float* src = a.src.f32();
  const int blocks = (a.H + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (a.n * a.H > kParallelElements)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock, c1 = std::min(a.H, c0 + kColumnBlock);
    for (int64_t i = 0; i < a.n; ++i) {
      const float* g = src + i * a.H;
      float* d = dst + static_cast<int64_t>(a.rows[i]) * a.H;
      for (int j = c0; j < c1; ++j) d[j] += g[j];
    }
  }
}

}  // namespace bert
