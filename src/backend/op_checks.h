// Argument checks shared by every backend's Ops implementation, so the CPU reference and the
// GPU backends reject the same bad calls with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"

namespace bert {

inline void check_linear_shape(const char* op, int64_t M, int K, int N) {
  BERT_CHECK(M >= 0 && K > 0 && N > 0, Code::invalid_argument, op, ": bad shape M=", M, " K=", K, " N=", N);
}

inline void check_element_count(const char* op, int64_t n) {
  BERT_CHECK(n >= 0, Code::invalid_argument, op, ": bad element count ", n);
}

inline void check_rows_shape(const char* op, int64_t n, int H) {
  BERT_CHECK(n >= 0 && H > 0, Code::invalid_argument, op, ": bad shape rows=", n, " H=", H);
}

// Parameter segments of the optimizer ops: offsets and sizes not negative.
inline void check_segments(const char* op, const std::vector<ParamSegment>& segs) {
  for (size_t s = 0; s < segs.size(); ++s) {
    BERT_CHECK(segs[s].offset >= 0 && segs[s].size >= 0, Code::invalid_argument, op,
               ": segment ", s, " has offset ", segs[s].offset, " and size ", segs[s].size);
  }
}

// Rejects probabilities outside [0, 1).
inline void check_dropout_site(const char* op, const DropoutSite& site) {
  BERT_CHECK(site.p >= 0.0f && site.p < 1.0f, Code::invalid_argument, op, ": dropout probability ", site.p,
             " (tensor id ", site.tensor_id, ") is outside [0, 1)");
}

// Heads, head size, a layout starting at 0 with non-decreasing offsets, and the dropout site.
inline void check_attention_args(const char* op, const AttentionLayout& layout, int heads, int head_dim,
                                 const DropoutSite& site) {
  BERT_CHECK(heads > 0 && head_dim > 0, Code::invalid_argument, op, ": bad heads=", heads, " head_dim=", head_dim);
  BERT_CHECK(layout.num_seqs() >= 1 && layout.seq_start[0] == 0, Code::invalid_argument, op,
             ": layout needs seq_start = {0, ...} with at least one sequence");
  for (int b = 0; b < layout.num_seqs(); ++b) {
    BERT_CHECK(layout.seq_start[b + 1] >= layout.seq_start[b], Code::invalid_argument, op, ": seq_start[", b + 1,
               "] = ", layout.seq_start[b + 1], " is below seq_start[", b, "] = ", layout.seq_start[b]);
  }
  check_dropout_site(op, site);
}

inline void check_linear_bwd_buffers(Activation act, const float* pre_act, const float* dpre_scratch) {
  BERT_CHECK(act == Activation::none || (pre_act != nullptr && dpre_scratch != nullptr), Code::invalid_argument,
             "linear_bwd: an activation needs pre_act and dpre_scratch");
}

}  // namespace bert
