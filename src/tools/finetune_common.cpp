// Helpers of bert-finetune and bert-predict (see finetune_common.h).
#include "finetune_common.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
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

bool infer_logits(bert_session* s, const bert::GlueFeatures& f, int num_labels, int chunk, std::vector<float>& logits,
                  double* seconds) {
  logits.assign(static_cast<size_t>(f.count) * num_labels, 0.0f);
  BatchStorage st;
  const auto t0 = std::chrono::steady_clock::now();
  for (int begin = 0; begin < f.count; begin += chunk) {
    std::vector<int32_t> rows;
    for (int r = begin; r < std::min(f.count, begin + chunk); ++r) rows.push_back(r);
    const bert_batch b = make_batch(f, rows, false, false, st);
    float* out = logits.data() + static_cast<size_t>(begin) * num_labels;
    if (failed(bert_infer(s, &b, BERT_OUTPUT_LOGITS, out, rows.size() * num_labels), "bert_infer")) return false;
  }
  if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return true;
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
