// Shared by bert-finetune and bert-predict: where the weights come from (an engine checkpoint,
// or a Hugging Face folder imported on the fly), GLUE files turned into engine batches, outputs
// of bert_infer in chunks dealt to the ranks and gathered, and the task's metrics printed.
#pragma once

#include <cstdint>
#include <functional>
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
// is imported to `import_to` first (printing what the import did). Under a launcher every rank
// imports to that one path, so that their session configs agree: each writes a temporary file of
// its own and renames it into place (write_checkpoint), so a reader finds one whole file of the
// same weights whichever rank's rename came last. Throws bert::Error.
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

// This session's place in a distributed run (rank 0 of 1 without one).
struct Ranks {
  int rank = 0, world = 1;
  bool leader() const { return rank == 0; }
};
Ranks session_ranks(const bert_session* s);

// How long inference over a set took: in all (every rank's rows gathered), and each bert_infer
// call of this rank (the latency a server sees for one batch).
struct InferTiming {
  double seconds = 0;
  std::vector<double> call_seconds;
  // "latency of a call: p50 12.10 ms, p99 15.00 ms over 7 calls"
  std::string latency() const;
};

// The `width` outputs of bert_infer (BERT_OUTPUT_LOGITS) for every row in [0, count), in chunks of
// `chunk` rows: chunk k runs on rank k % world, and every rank gets every row's outputs (a sum of
// disjoint parts over the ranks, so exact). COLLECTIVE under a launcher. Returns false (after
// printing the error) when a call fails; `timing` (may be null) gets the times taken.
using BatchOfRows = std::function<bert_batch(const std::vector<int32_t>& rows, BatchStorage& storage)>;
bool infer_rows(bert_session* s, int count, size_t width, int chunk, const BatchOfRows& batch, std::vector<float>& out,
                InferTiming* timing);

// Logits [count, num_labels] of every feature row (infer_rows).
bool infer_logits(bert_session* s, const bert::GlueFeatures& f, int num_labels, int chunk, std::vector<float>& logits,
                  InferTiming* timing);

// Writes "index<TAB>prediction" lines for every example (its label, or a regression task's value),
// after an "index<TAB>prediction" header. Throws bert::Error when the file cannot be written.
void write_glue_predictions(const bert::GlueTask& task, const GlueSet& set, const std::vector<float>& logits,
                            const std::string& path);

// The task metric of logits against a labelled set, as "name value" pairs.
std::vector<std::pair<std::string, double>> glue_metrics(const bert::GlueTask& task, const GlueSet& set,
                                                         const std::vector<float>& logits);
std::string format_metrics(const std::vector<std::pair<std::string, double>>& metrics);

}  // namespace bert_tools
