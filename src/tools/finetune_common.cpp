// Helpers of bert-finetune and bert-predict (see finetune_common.h).
#include "finetune_common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "tasks/task_metrics.h"
#include "tool_common.h"

namespace bert_tools {

InitWeights resolve_init_weights(const std::string& source, const std::string& import_to) {
  InitWeights w;
  w.checkpoint = source;
  if (std::filesystem::is_directory(source)) {
    bert::ImportReport r = bert::import_weights(source, bert::ImportOptions{}, import_to);
    for (const std::string& n : r.notices) std::printf("notice: %s\n", n.c_str());
    std::printf("imported %s (%s, %s) to %s\n", source.c_str(), r.producer.c_str(), r.task.name().c_str(),
                import_to.c_str());
    w.checkpoint = import_to;
  }
  w.config = bert::read_checkpoint_config(w.checkpoint);  // the session reads and verifies the whole file
  return w;
}

GlueSet load_glue_set(const bert::GlueTask& task, const std::string& path, const bert::Tokenizer& tokenizer,
                      int max_seq_length) {
  GlueSet set;
  int64_t skipped = 0;
  set.examples = bert::read_glue_tsv(task, path, &skipped);
  BERT_CHECK(!set.examples.empty(), bert::Code::data, "GLUE file '", path, "' has no examples");
  if (skipped) std::printf("%s: skipped %lld malformed lines\n", path.c_str(), static_cast<long long>(skipped));
  set.labelled = task.regression() ? true : set.examples[0].label >= 0;
  set.features = bert::glue_features(set.examples, tokenizer, max_seq_length);
  return set;
}

bert_batch make_batch(const bert::GlueFeatures& f, const std::vector<int32_t>& rows, bool regression, bool with_labels,
                      BatchStorage& st) {
  const int S = f.seq_length;
  st.ids.clear(), st.seg.clear(), st.mask.clear(), st.labels.clear(), st.values.clear();
  for (int32_t r : rows) {
    const size_t at = static_cast<size_t>(r) * S;
    st.ids.insert(st.ids.end(), f.input_ids.begin() + at, f.input_ids.begin() + at + S);
    st.seg.insert(st.seg.end(), f.segment_ids.begin() + at, f.segment_ids.begin() + at + S);
    st.mask.insert(st.mask.end(), f.input_mask.begin() + at, f.input_mask.begin() + at + S);
    st.labels.push_back(f.labels[r]);
    st.values.push_back(f.values[r]);
  }
  bert_batch b;
  bert_batch_init(&b);
  b.batch_size = static_cast<int32_t>(rows.size());
  b.seq_length = S;
  b.input_ids = st.ids.data();
  b.segment_ids = st.seg.data();
  b.input_mask = st.mask.data();
  if (with_labels && regression) b.label_values = st.values.data();
  if (with_labels && !regression) b.labels = st.labels.data();
  return b;
}

Ranks session_ranks(const bert_session* s) {
  Ranks r;
  bert_session_rank(s, &r.rank, &r.world, nullptr);
  return r;
}

std::string InferTiming::latency() const {
  std::vector<double> sorted = call_seconds;
  std::sort(sorted.begin(), sorted.end());
  const auto percentile = [&sorted](double p) {  // nearest rank
    return sorted.empty() ? 0.0 : 1e3 * sorted[static_cast<size_t>(std::ceil(p * sorted.size())) - 1];
  };
  char line[128];
  std::snprintf(line, sizeof line, "latency of a call: p50 %.2f ms, p99 %.2f ms over %zu calls", percentile(0.5),
                percentile(0.99), sorted.size());
  return line;
}

bool infer_rows(bert_session* s, int count, size_t width, int chunk, const BatchOfRows& batch, std::vector<float>& out,
                InferTiming* timing) {
  const Ranks ranks = session_ranks(s);
  out.assign(static_cast<size_t>(count) * width, 0.0f);
  BatchStorage st;
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = true;
  for (int begin = chunk * ranks.rank; begin < count && ok; begin += chunk * ranks.world) {
    std::vector<int32_t> rows;
    for (int r = begin; r < std::min(count, begin + chunk); ++r) rows.push_back(r);
    const bert_batch b = batch(rows, st);
    const auto call_start = std::chrono::steady_clock::now();
    ok = !failed(bert_infer(s, &b, BERT_OUTPUT_LOGITS, out.data() + static_cast<size_t>(begin) * width,
                            rows.size() * width),
                 "bert_infer");
    if (timing) timing->call_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - call_start).count());
  }
  if (ranks.world > 1) {  // every rank joins, a failed one too, so that none waits for it
    float failures = ok ? 0.0f : 1.0f;
    if (failed(bert_allreduce_host(s, &failures, 1, BERT_REDUCE_MAX), "gathering the predictions")) return false;
    if (failures > 0) return false;
    if (failed(bert_allreduce_host(s, out.data(), out.size(), BERT_REDUCE_SUM), "gathering the predictions")) return false;
  }
  if (timing) timing->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ok;
}

bool infer_logits(bert_session* s, const bert::GlueFeatures& f, int num_labels, int chunk, std::vector<float>& logits,
                  InferTiming* timing) {
  return infer_rows(s, f.count, static_cast<size_t>(num_labels), chunk,
                    [&f](const std::vector<int32_t>& rows, BatchStorage& st) { return make_batch(f, rows, false, false, st); },
                    logits, timing);
}

void write_glue_predictions(const bert::GlueTask& task, const GlueSet& set, const std::vector<float>& logits,
                            const std::string& path) {
  std::ofstream out(path);
  out << "index\tprediction\n";
  const int L = task.num_labels();
  for (size_t i = 0; i < set.examples.size(); ++i) {
    const float* row = logits.data() + i * L;
    out << set.examples[i].id << '\t';
    if (task.regression()) out << row[0];
    else out << task.labels[std::max_element(row, row + L) - row];
    out << '\n';
  }
  out.close();
  BERT_CHECK(out, bert::Code::io, "cannot write '", path, "'");
}

std::vector<std::pair<std::string, double>> glue_metrics(const bert::GlueTask& task, const GlueSet& set,
                                                         const std::vector<float>& logits) {
  const int L = task.num_labels();
  std::vector<int32_t> predicted, gold;
  std::vector<double> predicted_values, gold_values;
  for (size_t i = 0; i < set.examples.size(); ++i) {
    const float* row = logits.data() + i * L;
    predicted.push_back(static_cast<int32_t>(std::max_element(row, row + L) - row));
    gold.push_back(set.examples[i].label);
    predicted_values.push_back(row[0]);
    gold_values.push_back(set.examples[i].value);
  }
  return bert::task_metrics(task.metric, predicted, gold, predicted_values, gold_values);
}

std::string format_metrics(const std::vector<std::pair<std::string, double>>& metrics) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(4);
  for (size_t i = 0; i < metrics.size(); ++i) os << (i ? ", " : "") << metrics[i].first << " " << metrics[i].second;
  return os.str();
}

}  // namespace bert_tools
