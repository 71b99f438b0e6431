// What every attention path derives from the heads, the head size and the dropout site: the CPU
// reference (cpu_attention.cpp), the GPU's reference path and its launch plan (attention_plan.h)
// and so the cost model.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/op_params.h"

namespace bert {

struct AttentionShape {
  AttentionShape(int heads_, int head_dim_, const DropoutSite& site)
      : heads(heads_),
        head_dim(head_dim_),
        H(static_cast<int64_t>(heads_) * head_dim_),
        ld_qkv(3 * H),
        scale(1.0f / std::sqrt(static_cast<float>(head_dim_))),
        keep_scale(dropout_keep_scale(site)) {}
  int heads, head_dim;
  int64_t H;         // the hidden width, heads · head_dim
  int64_t ld_qkv;    // the row stride of the packed [T, 3H] Q, K, V
  float scale;       // of the scores, 1/sqrt(head_dim)
  float keep_scale;  // of the kept probabilities, 1/(1 - p)
};

}  // namespace bert
