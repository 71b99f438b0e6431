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

void CpuOps::gather_rows_f32(float* out, const float* in, const int32_t* rows, int64_t n, int H) {
#pragma omp parallel for num_threads(threads_) if (n * H > kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(in + static_cast<int64_t>(rows[i]) * H, H, out + i * H);
  }
}

void CpuOps::scatter_add_rows_f32(float* dst, const float* src, const int32_t* rows, int64_t n,
                                   int H) {
  const int blocks = (H + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (n * H > kParallelElements)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock, c1 = std::min(H, c0 + kColumnBlock);
    for (int64_t i = 0; i < n; ++i) {
      const float* g = src + i * H;
      float* d = dst + static_cast<int64_t>(rows[i]) * H;
      for (int j = c0; j < c1; ++j) d[j] += g[j];
    }
  }
}

}  // namespace bert
