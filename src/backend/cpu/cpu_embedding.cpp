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

void CpuOps::embedding_fwd_impl(const EmbeddingFwdArgs& a) {
  float* out = a.out.f32();
#pragma omp parallel for num_threads(threads_) if (a.T * a.H > kParallelElements)
  for (int64_t t = 0; t < a.T; ++t) {
    const float* w = a.word_emb + static_cast<int64_t>(a.word_ids[t]) * a.H;
    const float* p = a.pos_emb + static_cast<int64_t>(a.pos_ids[t]) * a.H;
    const float* s = a.type_emb + static_cast<int64_t>(a.type_ids[t]) * a.H;
    float* y = out + t * a.H;  // [H]
    for (int j = 0; j < a.H; ++j) y[j] = w[j] + p[j] + s[j];
  }
}

void CpuOps::embedding_bwd_impl(const EmbeddingBwdArgs& a) {
  const float* dout = a.dout.f32();
  const int blocks = (a.H + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (a.T * a.H > kParallelElements)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock, c1 = std::min(a.H, c0 + kColumnBlock);
    for (int64_t t = 0; t < a.T; ++t) {
      const float* g = dout + t * a.H;
      float* w = a.dword + static_cast<int64_t>(a.word_ids[t]) * a.H;
      float* p = a.dpos + static_cast<int64_t>(a.pos_ids[t]) * a.H;
      float* s = a.dtype + static_cast<int64_t>(a.type_ids[t]) * a.H;
      for (int j = c0; j < c1; ++j) {
        w[j] += g[j];
        p[j] += g[j];
        s[j] += g[j];
      }
    }
  }
}

}  // namespace bert
