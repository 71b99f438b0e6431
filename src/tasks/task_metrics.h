// Metrics of the fine-tuning tasks as GLUE defines them (sklearn / scipy semantics): accuracy,
// binary F1 of class 1, Matthews correlation, Pearson and Spearman (ties get average ranks).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bert {

double accuracy(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold);
// F1 of the positive class 1 (0 when there is no true positive).
double f1_binary(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold);
// Multiclass Matthews correlation (sklearn's matthews_corrcoef); 0 when undefined.
double matthews_corrcoef(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold);
double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// A task's metrics by name ("matthews", "accuracy", "accuracy_f1", "pearson_spearman"), as
// (name, value) pairs; classification uses the argmax ids, regression the values.
std::vector<std::pair<std::string, double>> task_metrics(const std::string& metric, const std::vector<int32_t>& predicted,
                                                         const std::vector<int32_t>& gold,
                                                         const std::vector<double>& predicted_values,
                                                         const std::vector<double>& gold_values);

}  // namespace bert
