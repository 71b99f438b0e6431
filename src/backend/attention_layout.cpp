// AttentionLayout helpers shared by all backends (offsets of per-sequence attention blocks).
#include "backend/ops.h"

#include <algorithm>

namespace bert {

int AttentionLayout::max_len() const {
  int m = 0;
  for (size_t b = 1; b < seq_start.size(); ++b) m = std::max(m, seq_start[b] - seq_start[b - 1]);
  return m;
}

int64_t AttentionLayout::uniform_length() const {
  if (num_seqs() < 1) return 0;
  const int64_t L = seq_start[1] - seq_start[0];
  for (int b = 1; b < num_seqs(); ++b) {
    if (seq_start[b + 1] - seq_start[b] != L) return 0;
  }
  return L;
}

int64_t AttentionLayout::probs_offset(int b, int heads) const {
  int64_t total = 0;
  for (int i = 0; i < b; ++i) {
    int64_t len = seq_start[i + 1] - seq_start[i];
    total += len * len;
  }
  return total * heads;
}

int64_t AttentionLayout::probs_elems(int heads) const { return probs_offset(num_seqs(), heads); }

}  // namespace bert
