// A small valid DLE-layout batch for the C ABI tests, with helpers to break one field.
#pragma once

#include <bert.h>

#include <cstdint>
#include <vector>

struct TestBatch {
  int B, S, P;
  std::vector<int32_t> ids, seg, mask, pos, labels, nsp;
  TestBatch(int b, int s, int p, int vocab, uint32_t seed = 1) : B(b), S(s), P(p) {
    ids.assign(B * S, 0);
    seg.assign(B * S, 0);
    mask.assign(B * S, 0);
    pos.assign(B * P, 0);
    labels.assign(B * P, 0);
    nsp.assign(B, 0);
    uint32_t x = seed;
    auto rnd = [&](uint32_t n) {
      x = x * 1664525u + 1013904223u;
      return (x >> 8) % n;
    };
    for (int i = 0; i < B; ++i) {
      const int real = S / 2 + static_cast<int>(rnd(S / 2 + 1));
      for (int s = 0; s < real; ++s) {
        ids[i * S + s] = 5 + static_cast<int32_t>(rnd(vocab - 5));
        seg[i * S + s] = s > real / 2;
        mask[i * S + s] = 1;
      }
      for (int j = 0; j < P && 1 + 2 * j < real; ++j) {
        pos[i * P + j] = 1 + 2 * j;
        labels[i * P + j] = ids[i * S + 1 + 2 * j];
      }
      nsp[i] = static_cast<int32_t>(rnd(2));
    }
  }
  bert_batch view() const {
    bert_batch b;
    bert_batch_init(&b);
    b.batch_size = B;
    b.seq_length = S;
    b.max_predictions = P;
    b.input_ids = ids.data();
    b.segment_ids = seg.data();
    b.input_mask = mask.data();
    b.masked_lm_positions = pos.data();
    b.masked_lm_ids = labels.data();
    b.next_sentence_labels = nsp.data();
    return b;
  }
};

// A tiny model: 2 layers, hidden 32, vocabulary 100 (not a multiple of 8).
inline const char* kTinyConfig =
    R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "intermediate_size": 64, "max_position_embeddings": 64},
        "train": {"micro_batch": 4, "steps": 80, "lr": 0.02, "threads": 1},
        "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}})";
