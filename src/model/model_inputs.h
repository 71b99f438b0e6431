// ModelInputs: a host batch turned into what the model consumes — token rows (padded or
// unpadded), position/segment ids, the additive key mask, the attention layout, and the rows
// and labels of the masked-LM and NSP heads. Building it also validates the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "model/bert_config.h"

namespace bert {

struct BatchView {  // borrowed pointers to a DLE-layout batch on the host
  int batch_size = 0, seq_length = 0, max_predictions = 0;
  const int32_t* input_ids = nullptr;             // [B, S]
  const int32_t* segment_ids = nullptr;           // [B, S]
  const int32_t* input_mask = nullptr;            // [B, S]
  const int32_t* masked_lm_positions = nullptr;   // [B, P]
  const int32_t* masked_lm_ids = nullptr;         // [B, P]
  const int32_t* next_sentence_labels = nullptr;  // [B]
};

struct ModelInputs {
  AttentionLayout layout;
  std::vector<int32_t> word_ids, pos_ids, type_ids;  // [T]
  std::vector<float> key_bias;                       // [T]: 0 for real tokens, -10000 for padding
  std::vector<int32_t> cls_rows;                     // [B]: token row of each [CLS]
  std::vector<int32_t> nsp_labels;                   // [B]
  std::vector<int32_t> mlm_rows;                     // [Nm]: token row of each masked position
  std::vector<int32_t> mlm_labels;                   // [Nm]
  int64_t real_tokens = 0;                           // tokens with input_mask == 1
  int batch_size() const { return static_cast<int>(cls_rows.size()); }
  int64_t tokens() const { return layout.total_tokens(); }
};

// Validates `batch` against the model and the limits (throws Error(invalid_argument) naming the
// field, sample and value at fault) and builds the inputs. With `unpad`, sequences whose mask is
// a prefix of ones are packed back to back without their padding; otherwise every sequence
// keeps seq_length rows.
ModelInputs build_model_inputs(const BatchView& batch, const BertConfig& config, int max_batch,
                               int max_seq_length, int max_predictions, bool unpad);

}  // namespace bert
