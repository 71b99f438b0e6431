// Embeddings on the CPU: the lookup (word + position + type) and its backward. The backward
// splits the columns among threads and walks the tokens in order, so repeated ids sum in a fixed
// order (no races, identical results for any thread count).
#include <algorithm>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kColumnBlock = 128;

}  // namespace

void CpuOps::embedding_fwd_f32(float* out, const int32_t* word_ids, const int32_t* pos_ids,
                                const int32_t* type_ids, const float* word_emb, const float* pos_emb,
                                const float* type_emb, int64_t T, int H) {
#pragma omp parallel for num_threads(threads_) if (T * H > kParallelElements)
  for (int64_t t = 0; t < T; ++t) {
    const float* w = word_emb + static_cast<int64_t>(word_ids[t]) * H;
    const float* p = pos_emb + static_cast<int64_t>(pos_ids[t]) * H;
    const float* s = type_emb + static_cast<int64_t>(type_ids[t]) * H;
    float* y = out + t * H;  // [H]
    for (int j = 0; j < H; ++j) y[j] = w[j] + p[j] + s[j];
  }
}

void CpuOps::embedding_bwd_f32(float* dword, float* dpos, float* dtype, const float* dout,
                                const int32_t* word_ids, const int32_t* pos_ids,
                                const int32_t* type_ids, int64_t T, int H) {
  const int blocks = (H + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (T * H > kParallelElements)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock, c1 = std::min(H, c0 + kColumnBlock);
    for (int64_t t = 0; t < T; ++t) {
      const float* g = dout + t * H;
      float* w = dword + static_cast<int64_t>(word_ids[t]) * H;
      float* p = dpos + static_cast<int64_t>(pos_ids[t]) * H;
      float* s = dtype + static_cast<int64_t>(type_ids[t]) * H;
      for (int j = c0; j < c1; ++j) {
        w[j] += g[j];
        p[j] += g[j];
        s[j] += g[j];
      }
    }
  }
}

}  // namespace bert
