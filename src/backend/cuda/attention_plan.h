// The reference attention's launch plan on the GPU: which path a batch takes and the shape every
// path derives. CUDA-free, so that CudaOps (cuda_attention.cpp) and the cost model
// (src/perf/cost_model_ops.cpp) make the same choice from the same numbers.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/ops.h"

namespace bert {

// What every attention path derives from (heads, head_dim) and the dropout site.
struct AttentionShape {
  AttentionShape(int heads, int head_dim, const DropoutSite& site)
      : H(static_cast<int64_t>(heads) * head_dim),
        ld_qkv(3 * H),
        scale(1.0f / std::sqrt(static_cast<float>(head_dim))),
        keep_scale(1.0f / (1.0f - site.p)) {}
  int64_t H;         // the hidden width, heads · head_dim
  int64_t ld_qkv;    // the row stride of the packed [T, 3H] Q, K, V
  float scale;       // of the scores, 1/sqrt(head_dim)
  float keep_scale;  // of the kept probabilities, 1/(1 - p)
};

// Padded batches of more sequences than heads run as GEMMs batched over every (sequence, head)
// (attention_*_by_head); other batches as one head-batched GEMM per sequence.
inline bool attention_by_head(const AttentionLayout& layout, int heads) {
  return layout.uniform_length() > 0 && layout.num_seqs() > heads;
}

}  // namespace bert
