// Shared by bert-finetune and bert-predict: where the weights come from (an engine checkpoint,
// or a Hugging Face folder imported on the fly), GLUE files turned into engine batches, logits
// from bert_infer in chunks, and the task's metrics printed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "tasks/glue.h"
#include "text/tokenizer.h"

namespace bert_tools {

struct InitWeights {
  std::string checkpoint;  // an engine checkpoint file
  nlohmann::json config;   // its recorded config ("model", maybe "task")
};

// `source` is a checkpoint file or a Hugging Face folder (config.json + model.safetensors), which
// is imported to `import_to` first (printing what the import did). Throws bert::Error.
InitWeights resolve_init_weights(const std::string& source, const std::string& import_to);

// GLUE examples and their features; lower_case: -1 = from the vocabulary (uncased unless it
// has upper-case tokens).
struct GlueSet {
  std::vector<bert::GlueExample> examples;
  bert::GlueFeatures features;
  bool labelled = false;
};
GlueSet load_glue_set(const bert::GlueTask& task, const std::string& path, const bert::Tokenizer& tokenizer,
                      int max_seq_length);

// A bert_batch over rows `rows` of a feature set (labels included when `with_labels`); the
// gathered arrays live in `storage`.
struct BatchStorage {
  std::vector<int32_t> ids, seg, mask, labels, starts, ends;
  std::vector<float> values;
};
bert_batch make_batch(const bert::GlueFeatures& f, const std::vector<int32_t>& rows, bool regression, bool with_labels,
                      BatchStorage& storage);

// Logits [count, num_labels] of every feature row, in chunks of `chunk` sequences. Returns false
// (after printing the error) when a call fails.
bool infer_logits(bert_session* s, const bert::GlueFeatures& f, int num_labels, int chunk, std::vector<float>& logits,
                  double* seconds);

// The task metric of logits against a labelled set, as "name value" pairs.
std::vector<std::pair<std::string, double>> glue_metrics(const bert::GlueTask& task, const GlueSet& set,
                                                         const std::vector<float>& logits);
std::string format_metrics(const std::vector<std::pair<std::string, double>>& metrics);

}  // namespace bert_tools
