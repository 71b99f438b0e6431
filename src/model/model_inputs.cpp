// Batch validation and conversion to ModelInputs (padded or unpadded token layout).
#include "model/model_inputs.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace bert {
namespace {

void check_range(const char* field, int b, int j, int32_t value, int32_t lo, int32_t hi_excl) {
  if (value < lo || value >= hi_excl) {
    fail(Code::invalid_argument, "batch field '", field, "' sample ", b, " index ", j, ": value ",
         value, " is outside [", lo, ", ", hi_excl, ")");
  }
}

// The labels of a fine-tuning head, checked against the task (sizes as in build_model_inputs).
void add_task_labels(const BatchView& in, const TaskConfig& task, ModelInputs& out) {
  const int B = in.batch_size, S = in.seq_length, L = task.num_labels;
  switch (task.type) {
    case TaskType::pretraining:
      return;
    case TaskType::sequence_classification:
      if (task.regression()) {
        BERT_CHECK(in.label_values, Code::invalid_argument,
                   "batch field 'label_values' is NULL (a regression task, num_labels = 1, trains on float targets)");
        for (int b = 0; b < B; ++b) {
          BERT_CHECK(std::isfinite(in.label_values[b]), Code::invalid_argument, "batch field 'label_values' sample ",
                     b, ": value ", in.label_values[b], " is not finite");
          out.task_targets.push_back(in.label_values[b]);
        }
      } else {
        BERT_CHECK(in.labels, Code::invalid_argument, "batch field 'labels' is NULL (sequence classification)");
        for (int b = 0; b < B; ++b) {
          check_range("labels", b, 0, in.labels[b], 0, L);
          out.task_labels.push_back(in.labels[b]);
        }
      }
      break;
    case TaskType::token_classification:
      BERT_CHECK(in.labels, Code::invalid_argument, "batch field 'labels' is NULL (token classification: [B, S])");
      for (int b = 0; b < B; ++b) {
        for (int s = 0; s < S; ++s) {
          const int32_t v = in.labels[static_cast<int64_t>(b) * S + s];
          if (v >= 0) check_range("labels", b, s, v, 0, L);
          out.task_labels.push_back(v < 0 ? -1 : v);
        }
      }
      break;
    case TaskType::question_answering:
      BERT_CHECK(in.start_positions && in.end_positions, Code::invalid_argument,
                 "batch fields 'start_positions' and 'end_positions' must not be NULL (question answering)");
      // As Hugging Face: positions are clamped to [0, S] and S (outside the sequence) is ignored.
      for (const int32_t* field : {in.start_positions, in.end_positions}) {
        for (int b = 0; b < B; ++b) {
          const int32_t v = std::clamp<int32_t>(field[b], 0, S);
          out.task_labels.push_back(v == S ? -1 : v);
        }
      }
      break;
  }
  out.has_labels = true;
}

}  // namespace

ModelInputs build_model_inputs(const BatchView& in, const BertConfig& config, const TaskConfig& task, int max_batch,
                               int max_seq_length, int max_predictions, Padding padding, bool need_labels) {
  const int B = in.batch_size, S = in.seq_length, P = task.pretraining() ? in.max_predictions : 0;
  if (task.per_token()) padding = Padding{.prefix_masks = padding.prefix_masks};
  BERT_CHECK(B > 0, Code::invalid_argument, "batch_size must be positive, got ", B);
  BERT_CHECK(B <= max_batch, Code::invalid_argument, "batch_size ", B,
             " is larger than the configured micro-batch (train.micro_batch = ", max_batch, ")");
  BERT_CHECK(S > 0 && S <= max_seq_length, Code::invalid_argument, "seq_length ", S,
             " is outside [1, data.max_seq_length = ", max_seq_length, "]");
  BERT_CHECK(P >= 0 && P <= max_predictions, Code::invalid_argument, "max_predictions ", P,
             " is outside [0, data.max_predictions_per_seq = ", max_predictions, "]");
  const bool nsp_labels = task.pretraining() && need_labels;
  const std::pair<const char*, const void*> required[] = {
      {"input_ids", in.input_ids}, {"segment_ids", in.segment_ids}, {"input_mask", in.input_mask},
      {"next_sentence_labels", nsp_labels ? in.next_sentence_labels : in.input_ids}};
  for (const auto& [name, ptr] : required) {
    BERT_CHECK(ptr != nullptr, Code::invalid_argument, "batch field '", name, "' is NULL");
  }
  BERT_CHECK(P == 0 || (in.masked_lm_positions && in.masked_lm_ids), Code::invalid_argument,
             "batch fields 'masked_lm_positions' and 'masked_lm_ids' must not be NULL when max_predictions > 0");

  struct Sample {
    int real = 0;       // tokens with input_mask 1
    bool prefix = true; // they are the first `real` positions
    int used = 0;       // positions up to the last real or masked token
    std::vector<std::pair<int32_t, int32_t>> masked;  // (position, label)
  };
  std::vector<Sample> samples(B);
  ModelInputs out;
  for (int b = 0; b < B; ++b) {
    const int32_t* ids = in.input_ids + static_cast<int64_t>(b) * S;
    const int32_t* seg = in.segment_ids + static_cast<int64_t>(b) * S;
    const int32_t* mask = in.input_mask + static_cast<int64_t>(b) * S;
    Sample& sample = samples[b];
    for (int s = 0; s < S; ++s) {
      check_range("input_ids", b, s, ids[s], 0, config.vocab_size);
      check_range("segment_ids", b, s, seg[s], 0, config.type_vocab_size);
      check_range("input_mask", b, s, mask[s], 0, 2);
      if (mask[s]) {
        sample.prefix = sample.prefix && sample.real == s;
        ++sample.real;
        sample.used = s + 1;
      }
    }
    BERT_CHECK(sample.real > 0, Code::invalid_argument, "batch sample ", b, " has no real token (input_mask all 0)");
    BERT_CHECK(sample.prefix || !padding.prefix_masks, Code::invalid_argument, "batch sample ", b,
               ": its input_mask is not ones then zeros, and the fused attention (train.fused_attention, cuDNN) "
               "masks each sequence by its count of leading keys: give prefix masks or set train.fused_attention false");
    if (nsp_labels) check_range("next_sentence_labels", b, 0, in.next_sentence_labels[b], 0, 2);
    out.real_tokens += sample.real;
    for (int j = 0; j < P; ++j) {
      const int32_t pos = in.masked_lm_positions[static_cast<int64_t>(b) * P + j];
      if (pos == 0) break;  // zero padding ends the real masks (position 0 is [CLS])
      check_range("masked_lm_positions", b, j, pos, 1, S);
      const int32_t label = in.masked_lm_ids[static_cast<int64_t>(b) * P + j];
      check_range("masked_lm_ids", b, j, label, 0, config.vocab_size);
      sample.masked.emplace_back(pos, label);
      sample.used = std::max(sample.used, static_cast<int>(pos) + 1);
    }
  }

  // Rows per sequence when not packed: S, or the longest used length rounded up to the multiple.
  int padded_len = S;
  if (padding.multiple > 0) {
    int longest = 0;
    for (const Sample& sample : samples) longest = std::max(longest, sample.used);
    padded_len = std::min(S, (longest + padding.multiple - 1) / padding.multiple * padding.multiple);
  }
  out.seq_length = S;
  out.layout.seq_start.push_back(0);
  for (int b = 0; b < B; ++b) {
    const int32_t* ids = in.input_ids + static_cast<int64_t>(b) * S;
    const int32_t* seg = in.segment_ids + static_cast<int64_t>(b) * S;
    const int32_t* mask = in.input_mask + static_cast<int64_t>(b) * S;
    const Sample& sample = samples[b];
    const bool packed = padding.unpad && sample.prefix && sample.used == sample.real;
    const int len = packed ? sample.real : padded_len;
    const int32_t row0 = out.layout.seq_start.back();
    for (int s = 0; s < len; ++s) {
      out.word_ids.push_back(ids[s]);
      out.pos_ids.push_back(s);
      out.type_ids.push_back(seg[s]);
      out.key_bias.push_back(mask[s] ? 0.0f : -10000.0f);
    }
    out.layout.seq_start.push_back(row0 + len);
    out.cls_rows.push_back(row0);
    out.nsp_labels.push_back(nsp_labels ? in.next_sentence_labels[b] : 0);
    for (const auto& [pos, label] : sample.masked) {
      out.mlm_rows.push_back(row0 + pos);
      out.mlm_labels.push_back(label);
    }
    out.mlm_labelled += static_cast<int64_t>(sample.masked.size());
    if (padding.fixed_mlm_rows && task.pretraining()) {
      out.mlm_rows.resize(out.mlm_rows.size() + max_predictions - sample.masked.size(), row0);
      out.mlm_labels.resize(out.mlm_rows.size(), -1);
    }
  }
  out.has_labels = task.pretraining() && need_labels;
  if (need_labels) add_task_labels(in, task, out);
  return out;
}

}  // namespace bert
