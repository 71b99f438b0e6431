// Batch validation and conversion to ModelInputs (padded or unpadded token layout).
#include "model/model_inputs.h"

#include <algorithm>

#include "core/error.h"

namespace bert {
namespace {

void check_range(const char* field, int b, int j, int32_t value, int32_t lo, int32_t hi_excl) {
  if (value < lo || value >= hi_excl) {
    fail(Code::invalid_argument, "batch field '", field, "' sample ", b, " index ", j, ": value ",
         value, " is outside [", lo, ", ", hi_excl, ")");
  }
}

}  // namespace

ModelInputs build_model_inputs(const BatchView& in, const BertConfig& config, int max_batch,
                               int max_seq_length, int max_predictions, bool unpad) {
  const int B = in.batch_size, S = in.seq_length, P = in.max_predictions;
  BERT_CHECK(B > 0, Code::invalid_argument, "batch_size must be positive, got ", B);
  BERT_CHECK(B <= max_batch, Code::invalid_argument, "batch_size ", B,
             " is larger than the configured micro-batch (train.micro_batch = ", max_batch, ")");
  BERT_CHECK(S > 0 && S <= max_seq_length, Code::invalid_argument, "seq_length ", S,
             " is outside [1, data.max_seq_length = ", max_seq_length, "]");
  BERT_CHECK(P >= 0 && P <= max_predictions, Code::invalid_argument, "max_predictions ", P,
             " is outside [0, data.max_predictions_per_seq = ", max_predictions, "]");
  const std::pair<const char*, const void*> required[] = {
      {"input_ids", in.input_ids}, {"segment_ids", in.segment_ids}, {"input_mask", in.input_mask},
      {"next_sentence_labels", in.next_sentence_labels}};
  for (const auto& [name, ptr] : required) {
    BERT_CHECK(ptr != nullptr, Code::invalid_argument, "batch field '", name, "' is NULL");
  }
  BERT_CHECK(P == 0 || (in.masked_lm_positions && in.masked_lm_ids), Code::invalid_argument,
             "batch fields 'masked_lm_positions' and 'masked_lm_ids' must not be NULL when max_predictions > 0");

  ModelInputs out;
  out.layout.seq_start.push_back(0);
  for (int b = 0; b < B; ++b) {
    const int32_t* ids = in.input_ids + static_cast<int64_t>(b) * S;
    const int32_t* seg = in.segment_ids + static_cast<int64_t>(b) * S;
    const int32_t* mask = in.input_mask + static_cast<int64_t>(b) * S;
    int real = 0;
    bool prefix = true;
    for (int s = 0; s < S; ++s) {
      check_range("input_ids", b, s, ids[s], 0, config.vocab_size);
      check_range("segment_ids", b, s, seg[s], 0, config.type_vocab_size);
      check_range("input_mask", b, s, mask[s], 0, 2);
      if (mask[s]) {
        prefix = prefix && real == s;
        ++real;
      }
    }
    BERT_CHECK(real > 0, Code::invalid_argument, "batch sample ", b, " has no real token (input_mask all 0)");
    check_range("next_sentence_labels", b, 0, in.next_sentence_labels[b], 0, 2);
    out.real_tokens += real;

    std::vector<std::pair<int32_t, int32_t>> masked;  // (position, label)
    int max_masked_pos = 0;
    for (int j = 0; j < P; ++j) {
      const int32_t pos = in.masked_lm_positions[static_cast<int64_t>(b) * P + j];
      if (pos == 0) break;  // zero padding ends the real masks (position 0 is [CLS])
      check_range("masked_lm_positions", b, j, pos, 1, S);
      const int32_t label = in.masked_lm_ids[static_cast<int64_t>(b) * P + j];
      check_range("masked_lm_ids", b, j, label, 0, config.vocab_size);
      masked.emplace_back(pos, label);
      max_masked_pos = std::max(max_masked_pos, static_cast<int>(pos));
    }

    const int len = (unpad && prefix && max_masked_pos < real) ? real : S;
    const int32_t row0 = out.layout.seq_start.back();
    for (int s = 0; s < len; ++s) {
      out.word_ids.push_back(ids[s]);
      out.pos_ids.push_back(s);
      out.type_ids.push_back(seg[s]);
      out.key_bias.push_back(mask[s] ? 0.0f : -10000.0f);
    }
    out.layout.seq_start.push_back(row0 + len);
    out.cls_rows.push_back(row0);
    out.nsp_labels.push_back(in.next_sentence_labels[b]);
    for (const auto& [pos, label] : masked) {
      out.mlm_rows.push_back(row0 + pos);
      out.mlm_labels.push_back(label);
    }
  }
  return out;
}

}  // namespace bert
