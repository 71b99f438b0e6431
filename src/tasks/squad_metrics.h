// SQuAD exact match and F1 exactly as the official evaluate-v1.1.py and evaluate-v2.0.py define
// them: answers normalised (lower-cased, ASCII punctuation removed, the articles a/an/the
// removed as whole words, whitespace collapsed), F1 over the bag of normalised tokens, the best
// score over the gold answers; v2.0 scores unanswerable questions (no gold answer) 1 for an
// empty prediction and 0 otherwise, and reports HasAns/NoAns breakdowns.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bert {

std::string squad_normalize(const std::string& text);
double squad_exact(const std::string& prediction, const std::string& gold);
// v2 = true: evaluate-v2.0's F1 (an empty side scores 1 only when both are empty).
double squad_f1(const std::string& prediction, const std::string& gold, bool v2);

// The official scripts' result for a dataset (SQuAD JSON: {"version", "data": [...]}) and
// predictions ({question id: answer text}): v1.1 {"exact_match", "f1"} (questions without a
// prediction count 0, as the script does after its message), v2.0 {"exact", "f1", "total",
// "HasAns_*", "NoAns_*"} (every question needs a prediction; every v1.1 question an answer).
// Percentages. Throws Error(data) naming what is malformed.
nlohmann::json squad_evaluate(const nlohmann::json& dataset, const nlohmann::json& predictions);

}  // namespace bert
