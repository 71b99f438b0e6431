// SQuAD in bert-finetune and bert-predict: a file's examples and windows, engine batches of
// windows (answer positions for training), start/end logits from bert_infer in chunks, and the
// predictions with the official EM/F1 when the file has answers.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bert.h"
#include "tasks/squad_examples.h"
#include "tasks/squad_features.h"
#include "tasks/squad_predictions.h"
#include "finetune_common.h"

namespace bert_tools {

struct SquadSet {
  bert::SquadFile file;
  bert::SquadFeatures features;
};
// Reads and featurises a SQuAD file, printing how many training questions were left out.
SquadSet load_squad_set(const std::string& path, const bert::Tokenizer& tokenizer,
                        const bert::SquadFeatureOptions& options, bool training);

// Windows `rows` of a feature set as a question-answering batch (start/end positions when
// `with_positions`); the gathered arrays live in `storage`.
bert_batch squad_batch(const bert::SquadFeatures& f, const std::vector<int32_t>& rows, bool with_positions,
                       BatchStorage& storage);

// Start/end logits [count, 2, seq_length] of every window, in chunks of `chunk` windows.
// Returns false (after printing the error) when a call fails.
bool infer_squad_logits(bert_session* s, const bert::SquadFeatures& f, int chunk, std::vector<float>& logits,
                        InferTiming* timing);

struct SquadOutcome {
  bert::SquadPredictions predictions;
  nlohmann::json metrics;  // the official script's result; null when some question has no answers
};
SquadOutcome squad_outcome(const SquadSet& set, const std::vector<float>& logits, const bert::Tokenizer& tokenizer,
                           const bert::SquadPredictionOptions& options);
// "exact_match 71.20, f1 80.05" (v1.1) or "exact 60.1, f1 63.2, HasAns_exact ..." (v2.0).
std::string format_squad_metrics(const nlohmann::json& metrics);

}  // namespace bert_tools
