// ModelInputs: a host batch turned into what the model consumes — token rows (padded or
// unpadded), position/segment ids, the additive key mask, the attention layout, and the rows
// and labels of the task's head (masked-LM and NSP, or a fine-tuning head). Building it also
// validates the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "model/bert_config.h"
#include "model/task_config.h"

namespace bert {

struct BatchView {  // borrowed pointers to a DLE-layout batch on the host
  int batch_size = 0, seq_length = 0, max_predictions = 0;
  const int32_t* input_ids = nullptr;             // [B, S]
  const int32_t* segment_ids = nullptr;           // [B, S]
  const int32_t* input_mask = nullptr;            // [B, S]
  const int32_t* masked_lm_positions = nullptr;   // [B, P]
  const int32_t* masked_lm_ids = nullptr;         // [B, P]
  const int32_t* next_sentence_labels = nullptr;  // [B]
  // Fine-tuning labels (see bert_batch in capi/bert.h).
  const int32_t* labels = nullptr;           // [B] classes, or [B, S] token classes (< 0: ignored)
  const float* label_values = nullptr;       // [B] regression targets
  const int32_t* start_positions = nullptr;  // [B]
  const int32_t* end_positions = nullptr;    // [B]
};

struct ModelInputs {
  AttentionLayout layout;
  std::vector<int32_t> word_ids, pos_ids, type_ids;  // [T]
  std::vector<float> key_bias;                       // [T]: 0 for real tokens, -10000 for padding
  std::vector<int32_t> cls_rows;                     // [B]: token row of each [CLS]
  std::vector<int32_t> nsp_labels;                   // [B]
  std::vector<int32_t> mlm_rows;                     // [Nm]: token row of each masked position
  std::vector<int32_t> mlm_labels;                   // [Nm]: < 0 for the unlabelled fixed rows
  int64_t mlm_labelled = 0;                          // MLM rows with a label
  // Fine-tuning heads: class ids [B] (sequence), [T] (token; -1 ignored) or start then end
  // positions [2B] (QA; -1 ignored); regression targets [B].
  std::vector<int32_t> task_labels;
  std::vector<float> task_targets;
  bool has_labels = false;
  int64_t real_tokens = 0;                           // tokens with input_mask == 1
  int seq_length = 0;                                // S of the host batch
  int batch_size() const { return static_cast<int>(cls_rows.size()); }
  int64_t tokens() const { return layout.total_tokens(); }
};

// How a batch's sequences become token rows.
struct Padding {
  // Pack sequences whose mask is a prefix of ones back to back without their padding.
  bool unpad = false;
  // Not packed: every sequence keeps the same number of rows, the batch's longest sequence (its
  // last real or masked token) rounded up to a multiple of this, at most seq_length; 0: seq_length.
  int multiple = 0;
  // Every sequence gets max_predictions MLM rows, those past its masked positions unlabelled (row
  // of its [CLS], label -1): recorded work's MLM head then has a shape that depends only on B.
  bool fixed_mlm_rows = false;
  // The attention masks each sequence by its count of leading keys (cuDNN's fused attention): a
  // sample whose input_mask is not ones then zeros is refused, as cuDNN would attend to the wrong keys.
  bool prefix_masks = false;
};

// Validates `batch` against the model and the limits (throws Error(invalid_argument) naming the
// field, sample and value at fault) and builds the inputs, its rows laid out by `padding` (the
// per-token heads always keep seq_length rows per sequence). Without `need_labels` (inference)
// the label fields may be NULL.
ModelInputs build_model_inputs(const BatchView& batch, const BertConfig& config, const TaskConfig& task,
                               int max_batch, int max_seq_length, int max_predictions, Padding padding,
                               bool need_labels);

}  // namespace bert
