// Argument checks shared by every backend's Ops implementation, so the CPU reference and the
// GPU backends reject the same bad calls with the same messages.
#pragma once

#include <cstdint>

#include "backend/ops.h"
#include "core/error.h"

namespace bert {

inline void check_linear_shape(const char* op, int64_t M, int K, int N) {
  BERT_CHECK(M >= 0 && K > 0 && N > 0, Code::invalid_argument, op, ": bad shape M=", M, " K=", K, " N=", N);
}

inline void check_linear_bwd_buffers(Activation act, const float* pre_act, const float* dpre_scratch) {
  BERT_CHECK(act == Activation::none || (pre_act != nullptr && dpre_scratch != nullptr), Code::invalid_argument,
             "linear_bwd: an activation needs pre_act and dpre_scratch");
}

}  // namespace bert
