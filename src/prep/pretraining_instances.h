// Training instances from tokenized documents with the semantics of BERT's
// create_pretraining_data.py: segments A/B from whole sentences, 50% random next segment from
// another document (unused sentences are put back), short_seq_prob shorter targets, random
// front/back truncation, and masked-LM predictions with the 80/10/10 rule (optionally whole-word).
#pragma once

#include <cstdint>
#include <vector>

#include "prep/prep_random.h"
#include "text/vocab.h"

namespace bert {

struct InstanceOptions {
  int max_seq_length = 128;
  int max_predictions = 20;
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;
  bool whole_word_mask = false;
};

struct TokenizedDocument {
  std::vector<int32_t> tokens;          // all sentences concatenated
  std::vector<uint32_t> sentence_ends;  // end offset of each sentence in tokens
  size_t sentences() const { return sentence_ends.size(); }
  uint32_t sentence_begin(size_t i) const { return i == 0 ? 0 : sentence_ends[i - 1]; }
};

struct MaskCounts {
  uint64_t masked = 0, replaced_mask = 0, kept = 0, random = 0;
};

// The instances of one shard, variable length and unpadded, in creation order.
struct InstanceBuffer {
  std::vector<int32_t> input_ids;          // masked input ids, all instances concatenated
  std::vector<uint64_t> token_offsets{0};  // [n + 1]
  std::vector<uint16_t> segment_a_length;  // tokens with segment id 0 ([CLS] A [SEP])
  std::vector<int32_t> positions, labels;  // masked positions (ascending) and original ids
  std::vector<uint64_t> mask_offsets{0};   // [n + 1]
  std::vector<uint8_t> random_next;        // next_sentence_label: 1 when B is a random segment

  size_t size() const { return random_next.size(); }
  uint64_t length(size_t i) const { return token_offsets[i + 1] - token_offsets[i]; }
  uint64_t masks(size_t i) const { return mask_offsets[i + 1] - mask_offsets[i]; }
};

// Appends the instances of docs[doc_index] to `out`; random next segments come from `docs`.
void create_instances_from_document(const std::vector<TokenizedDocument>& docs, size_t doc_index,
                                    const InstanceOptions& options, const Vocab& vocab, PrepRandom& rng,
                                    InstanceBuffer& out, MaskCounts& counts);

}  // namespace bert
