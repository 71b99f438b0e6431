// GLUE tasks: the TSV files of the GLUE benchmark (CoLA, SST-2, MRPC, STS-B, QQP, MNLI matched
// and mismatched, QNLI, RTE, WNLI) read by header name as Hugging Face's processors read them
// (tab-split, no quoting; CoLA's train/dev files have no header), labels mapped to ids, and the
// examples turned into BERT features: [CLS] a [SEP] (b [SEP]), longest-first truncation,
// segment ids, mask, padded to max_seq_length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace bert {

struct GlueTask {
  std::string name;                 // "cola", "sst-2", ..., "mnli", "mnli-mm"
  std::vector<std::string> labels;  // label names in id order; empty: regression (STS-B)
  std::string metric;               // "matthews", "accuracy", "accuracy_f1", "pearson_spearman"
  std::string text_a, text_b;       // header names of the text columns (text_b empty: single sentence)
  std::string label;                // header name of the label column
  std::string dev_file;             // "dev.tsv", "dev_matched.tsv", "dev_mismatched.tsv"
  bool regression() const { return labels.empty(); }
  int num_labels() const { return regression() ? 1 : static_cast<int>(labels.size()); }
};

// The task of a name (case-insensitive: "SST-2", "sst2", "MNLI-mm", ...); Error(invalid_argument)
// listing the known names otherwise.
GlueTask glue_task(const std::string& name);

struct GlueExample {
  std::string id;            // the row's "index"/"id" column, or its line number
  std::string text_a, text_b;
  int32_t label = -1;        // class id; -1 when the file has no label column (test sets)
  float value = 0.0f;        // regression target (STS-B)
};

// Reads a GLUE TSV file. Lines whose columns do not reach the needed ones are skipped (as HF's
// QQP reader does) and counted in *skipped. Error(io) if unreadable, Error(data) naming file,
// line and value for an unknown label or a missing header column.
std::vector<GlueExample> read_glue_tsv(const GlueTask& task, const std::string& path, int64_t* skipped = nullptr);

struct GlueFeatures {
  int count = 0, seq_length = 0;
  std::vector<int32_t> input_ids, segment_ids, input_mask;  // [count, seq_length]
  std::vector<int32_t> labels;                              // [count] (classification)
  std::vector<float> values;                                // [count] (regression)
};

// [CLS] a [SEP] (b [SEP]) with the longer of a and b truncated one token at a time until the
// pair fits max_seq_length, padded with [PAD].
GlueFeatures glue_features(const std::vector<GlueExample>& examples, const Tokenizer& tokenizer, int max_seq_length);

}  // namespace bert
