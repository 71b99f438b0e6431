// SQuAD sets, batches, logits and scores for the fine-tuning tools (see squad_task.h).
#include "squad_task.h"

#include <chrono>
#include <cstdio>
#include <sstream>

#include "tasks/squad_metrics.h"
#include "tool_common.h"

namespace bert_tools {

SquadSet load_squad_set(const std::string& path, const bert::Tokenizer& tokenizer,
                        const bert::SquadFeatureOptions& options, bool training) {
  bert::check_squad_options(options);
  SquadSet set;
  set.file = bert::read_squad_file(path, training);
  set.features = bert::squad_features(set.file, tokenizer, options, training);
  if (set.features.skipped) {
    std::printf("%s: left out %lld questions whose answer text is not at answer_start\n", path.c_str(),
                static_cast<long long>(set.features.skipped));
  }
  return set;
}

bert_batch squad_batch(const bert::SquadFeatures& f, const std::vector<int32_t>& rows, bool with_positions,
                       BatchStorage& st) {
  const size_t S = static_cast<size_t>(f.seq_length);
  st.ids.clear(), st.seg.clear(), st.mask.clear(), st.starts.clear(), st.ends.clear();
  for (int32_t r : rows) {
    const size_t at = static_cast<size_t>(r) * S;
    st.ids.insert(st.ids.end(), f.input_ids.begin() + at, f.input_ids.begin() + at + S);
    st.seg.insert(st.seg.end(), f.segment_ids.begin() + at, f.segment_ids.begin() + at + S);
    st.mask.insert(st.mask.end(), f.input_mask.begin() + at, f.input_mask.begin() + at + S);
    st.starts.push_back(f.start_positions[r]);
    st.ends.push_back(f.end_positions[r]);
  }
  bert_batch b;
  bert_batch_init(&b);
  b.batch_size = static_cast<int32_t>(rows.size());
  b.seq_length = f.seq_length;
  b.input_ids = st.ids.data();
  b.segment_ids = st.seg.data();
  b.input_mask = st.mask.data();
  if (with_positions) {
    b.start_positions = st.starts.data();
    b.end_positions = st.ends.data();
  }
  return b;
}

bool infer_squad_logits(bert_session* s, const bert::SquadFeatures& f, int chunk, std::vector<float>& logits,
                        InferTiming* timing) {
  return infer_rows(s, f.count, 2 * static_cast<size_t>(f.seq_length), chunk,
                    [&f](const std::vector<int32_t>& rows, BatchStorage& st) { return squad_batch(f, rows, false, st); },
                    logits, timing);
}

SquadOutcome squad_outcome(const SquadSet& set, const std::vector<float>& logits, const bert::Tokenizer& tokenizer,
                           const bert::SquadPredictionOptions& options) {
  SquadOutcome o;
  o.predictions = bert::squad_predictions(set.file, set.features, logits.data(), tokenizer, options);
  if (set.file.has_answers) {
    nlohmann::json answers = nlohmann::json::object();
    for (const auto& [id, text] : o.predictions.predictions.items()) answers[id] = text;
    o.metrics = bert::squad_evaluate(set.file.json, answers);
  }
  return o;
}

std::string format_squad_metrics(const nlohmann::json& metrics) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  bool first = true;
  for (const char* key : {"exact_match", "exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"}) {
    if (!metrics.contains(key)) continue;
    os << (first ? "" : ", ") << key << " " << metrics[key].get<double>();
    first = false;
  }
  return os.str();
}

}  // namespace bert_tools
