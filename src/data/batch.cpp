// HostBatch storage helpers.
#include "data/batch.h"

namespace bert {

void HostBatch::resize(int B, int S, int P) {
  batch_size = B;
  seq_length = S;
  max_predictions = P;
  input_ids.assign(static_cast<size_t>(B) * S, 0);
  segment_ids.assign(static_cast<size_t>(B) * S, 0);
  input_mask.assign(static_cast<size_t>(B) * S, 0);
  masked_lm_positions.assign(static_cast<size_t>(B) * P, 0);
  masked_lm_ids.assign(static_cast<size_t>(B) * P, 0);
  next_sentence_labels.assign(static_cast<size_t>(B), 0);
}

int64_t HostBatch::real_tokens() const {
  int64_t n = 0;
  for (int32_t m : input_mask) n += m != 0;
  return n;
}

}  // namespace bert
