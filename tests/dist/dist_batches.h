// Deterministic pretraining batches for the distributed tests: the same global batch on every
// rank (a seeded generator), each sample with exactly `preds` masked positions so every
// micro-batch's mean MLM loss has the same weight — then the mean over ranks of per-rank means
// equals the mean over the global batch, and W ranks must match one process exactly.
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "bert.h"

struct GlobalBatch {
  int rows = 0, seq = 0, preds = 0;
  std::vector<int32_t> ids, segments, mask, positions, labels, nsp;

  GlobalBatch(int rows_, int seq_, int preds_, int vocab, uint64_t seed) : rows(rows_), seq(seq_), preds(preds_) {
    uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
    auto next = [&](int bound) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(bound));
    };
    ids.assign(rows * seq, 0);
    segments.assign(rows * seq, 0);
    mask.assign(rows * seq, 0);
    positions.assign(rows * preds, 0);
    labels.assign(rows * preds, 0);
    nsp.assign(rows, 0);
    for (int r = 0; r < rows; ++r) {
      const int length = preds + 2 + next(seq - preds - 1);  // real tokens, the rest is padding
      for (int s = 0; s < length; ++s) {
        ids[r * seq + s] = 5 + next(vocab - 5);
        mask[r * seq + s] = 1;
        segments[r * seq + s] = s >= length / 2 ? 1 : 0;
      }
      for (int p = 0; p < preds; ++p) {
        positions[r * preds + p] = 1 + p * (length - 2) / preds;  // distinct, inside the sample
        labels[r * preds + p] = 5 + next(vocab - 5);
      }
      nsp[r] = next(2);
    }
  }

  // Rows [begin, begin + count) as a bert_batch (pointers into this object).
  bert_batch view(int begin, int count) const {
    bert_batch b;
    bert_batch_init(&b);
    b.batch_size = count;
    b.seq_length = seq;
    b.max_predictions = preds;
    b.input_ids = ids.data() + begin * seq;
    b.segment_ids = segments.data() + begin * seq;
    b.input_mask = mask.data() + begin * seq;
    b.masked_lm_positions = positions.data() + begin * preds;
    b.masked_lm_ids = labels.data() + begin * preds;
    b.next_sentence_labels = nsp.data() + begin;
    return b;
  }
};

// Every parameter of the session, in bert_param_info order, as one vector.
inline std::vector<float> all_weights(bert_session* s) {
  size_t count = 0;
  bert_param_count(s, &count);
  std::vector<float> out;
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    int ndim = 0;
    int64_t shape[BERT_MAX_PARAM_DIMS];
    bert_param_info(s, i, &name, &ndim, shape);
    size_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    std::vector<float> w(n);
    EXPECT_EQ(bert_param_read(s, name, w.data(), n), BERT_OK) << bert_last_error();
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

// Per-step losses and gradient norms, and the weights at the end, of one run.
struct Trace {
  std::vector<float> loss, grad_norm, weights;
};

