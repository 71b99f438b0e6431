// The parameter table: every tensor of the task's Hugging Face model (BertForPreTraining,
// BertForSequenceClassification, ...) under its HF name, with its shape and its offset in one
// flat fp32 buffer (gradients use the same layout). Query, key and value of a layer are stored
// back to back so one [3H, H] GEMM computes all three.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "model/bert_config.h"
#include "model/task_config.h"

namespace bert {

enum class ParamInit { normal, zeros, ones };

// The most dimensions a parameter has (the C ABI's BERT_MAX_PARAM_DIMS; checked when the table is built).
constexpr size_t kMaxParamDims = 4;

struct ParamEntry {
  std::string name;            // Hugging Face name
  std::vector<int64_t> shape;  // Hugging Face shape (word embeddings: config vocab_size rows)
  int64_t offset = 0;          // element offset in the flat buffer
  int64_t stored_elems = 0;    // elements stored (word embeddings: padded vocab rows)
  ParamInit init = ParamInit::normal;
  bool weight_decay = true;    // false for biases and LayerNorm parameters
  int64_t elems() const;       // product of shape
};

// Offsets of the tensors the model uses, per encoder layer.
struct LayerParams {
  int64_t qkv_w, qkv_b, attn_out_w, attn_out_b, attn_ln_g, attn_ln_b;
  int64_t inter_w, inter_b, out_w, out_b, out_ln_g, out_ln_b;
};

struct ParamTable {
  explicit ParamTable(const BertConfig& config, const TaskConfig& task = TaskConfig());

  std::vector<ParamEntry> entries;  // in Hugging Face named_parameters() order
  int64_t total_elems = 0;          // size of the flat buffer

  int64_t word_emb, pos_emb, type_emb, emb_ln_g, emb_ln_b;
  std::vector<LayerParams> layers;
  // -1 where the task's model lacks them (no pooler for QA / token classification, no MLM/NSP
  // heads in fine-tuning models).
  int64_t pooler_w = -1, pooler_b = -1, mlm_bias = -1, mlm_dense_w = -1, mlm_dense_b = -1, mlm_ln_g = -1,
          mlm_ln_b = -1, nsp_w = -1, nsp_b = -1;
  int64_t head_w = -1, head_b = -1;  // classifier / qa_outputs: [num_labels, H], [num_labels]
  size_t first_head_entry = 0;       // entries from here on belong to the task head (initialised, not loaded)

  // Index into entries, or -1.
  int find(const std::string& name) const;
  // One optimizer segment per parameter with its weight decay.
  std::vector<ParamSegment> segments(float weight_decay) const;
};

}  // namespace bert
