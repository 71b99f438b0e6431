// SQuAD answers from start/end logits as Google's run_squad.py write_predictions and Hugging
// Face's compute_predictions_logits make them: per window the n_best highest start and end logits
// (ties: lower position first), spans inside the window's context pieces, starting at a piece
// whose max-context window this is, end >= start, at most max_answer_length pieces; all windows'
// spans ranked by start + end logit; texts de-tokenised (" ##" joined) and projected back onto the
// original words (get_final_text: basic tokenisation of the words, a character alignment with
// spaces removed, the original text when the alignment fails); duplicates dropped; softmax
// probabilities over the n-best. v2.0: the null answer scores the lowest [CLS] start + end over
// the windows and is predicted when null score - best non-null score > null_score_diff_threshold.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tasks/squad_examples.h"
#include "tasks/squad_features.h"
#include "text/tokenizer.h"

namespace bert {

struct SquadPredictionOptions {
  int n_best = 20;
  int max_answer_length = 30;
  bool v2 = false;  // version_2_with_negative
  double null_score_diff_threshold = 0.0;
};

struct SquadPredictions {
  nlohmann::ordered_json predictions;  // {question id: answer text} (predictions.json)
  nlohmann::ordered_json nbest;        // {question id: [{text, probability, start_logit, end_logit}]}
  nlohmann::ordered_json null_odds;    // v2.0: {question id: null score - best non-null score}
};

// `logits` holds each feature's start logits then its end logits ([count, 2, seq_length], as
// bert_infer returns them for question answering). `tokenizer` is the one that made the features
// (its vocabulary names the pieces; its lower-casing is get_final_text's do_lower_case).
SquadPredictions squad_predictions(const SquadFile& file, const SquadFeatures& features, const float* logits,
                                   const Tokenizer& tokenizer, const SquadPredictionOptions& options);

// get_final_text: the part of `orig_text` (original words joined by spaces) that `pred_text`
// (de-tokenised pieces) covers, or orig_text when they cannot be aligned.
std::string squad_final_text(const std::string& pred_text, const std::string& orig_text, const BasicTokenizer& basic);

// Writes DIR/predictions.json, DIR/nbest_predictions.json and, for v2.0, DIR/null_odds.json
// (indented as run_squad writes them). Error(io) naming the file.
void write_squad_predictions(const SquadPredictions& p, bool v2, const std::string& dir);

}  // namespace bert
