// Accuracy, F1, Matthews correlation, Pearson and Spearman (see task_metrics.h).
#include "tasks/task_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace bert {
namespace {

void check_sizes(size_t a, size_t b) {
  BERT_CHECK(a == b && a > 0, Code::invalid_argument, "metric over ", a, " predictions and ", b, " labels");
}

// Ranks 1..n with ties given their average rank (scipy.stats.rankdata "average").
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return x[i] < x[j]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[order[k]] = avg;
    i = j + 1;
  }
  return r;
}

}  // namespace

double accuracy(const std::vector<int32_t>& p, const std::vector<int32_t>& g) {
  check_sizes(p.size(), g.size());
  size_t hit = 0;
  for (size_t i = 0; i < p.size(); ++i) hit += p[i] == g[i];
  return static_cast<double>(hit) / p.size();
}

double f1_binary(const std::vector<int32_t>& p, const std::vector<int32_t>& g) {
  check_sizes(p.size(), g.size());
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    tp += p[i] == 1 && g[i] == 1;
    fp += p[i] == 1 && g[i] != 1;
    fn += p[i] != 1 && g[i] == 1;
  }
  return tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
}

double matthews_corrcoef(const std::vector<int32_t>& p, const std::vector<int32_t>& g) {
  check_sizes(p.size(), g.size());
  const int32_t k = std::max(*std::max_element(p.begin(), p.end()), *std::max_element(g.begin(), g.end())) + 1;
  std::vector<double> t(k, 0), q(k, 0);  // true and predicted class counts
  double c = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    t[g[i]] += 1;
    q[p[i]] += 1;
    c += p[i] == g[i];
  }
  const double s = static_cast<double>(p.size());
  double pt = 0, pp = 0, tt = 0;
  for (int32_t j = 0; j < k; ++j) {
    pt += q[j] * t[j];
    pp += q[j] * q[j];
    tt += t[j] * t[j];
  }
  const double denom = std::sqrt((s * s - pp) * (s * s - tt));
  return denom == 0 ? 0.0 : (c * s - pt) / denom;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x.size(), y.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / x.size();
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / y.size();
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx == 0 || syy == 0 ? 0.0 : sxy / std::sqrt(sxx * syy);
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) { return pearson(ranks(x), ranks(y)); }

std::vector<std::pair<std::string, double>> task_metrics(const std::string& metric, const std::vector<int32_t>& predicted,
                                                         const std::vector<int32_t>& gold,
                                                         const std::vector<double>& predicted_values,
                                                         const std::vector<double>& gold_values) {
  if (metric == "matthews") return {{"matthews_corr", matthews_corrcoef(predicted, gold)}};
  if (metric == "accuracy") return {{"accuracy", accuracy(predicted, gold)}};
  if (metric == "accuracy_f1") return {{"accuracy", accuracy(predicted, gold)}, {"f1", f1_binary(predicted, gold)}};
  if (metric == "pearson_spearman") {
    return {{"pearson", pearson(predicted_values, gold_values)}, {"spearman", spearman(predicted_values, gold_values)}};
  }
  fail(Code::invalid_argument, "unknown metric '", metric, "'");
}

}  // namespace bert
