// CoNLL batches and predicted tags for the fine-tuning tools (see conll_task.h).
#include "conll_task.h"

#include <algorithm>
#include <chrono>
#include <fstream>

#include "core/error.h"
#include "tool_common.h"

namespace bert_tools {

bert_batch conll_batch(const bert::ConllFeatures& f, const std::vector<int32_t>& rows, bool with_labels,
                       BatchStorage& st) {
  const size_t S = static_cast<size_t>(f.seq_length);
  st.ids.clear(), st.seg.clear(), st.mask.clear(), st.labels.clear();
  for (int32_t r : rows) {
    const size_t at = static_cast<size_t>(r) * S;
    st.ids.insert(st.ids.end(), f.input_ids.begin() + at, f.input_ids.begin() + at + S);
    st.seg.insert(st.seg.end(), f.segment_ids.begin() + at, f.segment_ids.begin() + at + S);
    st.mask.insert(st.mask.end(), f.input_mask.begin() + at, f.input_mask.begin() + at + S);
    st.labels.insert(st.labels.end(), f.labels.begin() + at, f.labels.begin() + at + S);
  }
  bert_batch b;
  bert_batch_init(&b);
  b.batch_size = static_cast<int32_t>(rows.size());
  b.seq_length = f.seq_length;
  b.input_ids = st.ids.data();
  b.segment_ids = st.seg.data();
  b.input_mask = st.mask.data();
  if (with_labels) b.labels = st.labels.data();
  return b;
}

int64_t write_conll_predictions(const std::vector<bert::ConllSentence>& sentences,
                                std::vector<std::vector<std::string>>& predicted, const std::string& path) {
  std::ofstream out(path);
  int64_t cut = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    const bert::ConllSentence& sentence = sentences[i];
    cut += static_cast<int64_t>(sentence.words.size() - predicted[i].size());
    predicted[i].resize(sentence.words.size(), "O");
    for (size_t w = 0; w < sentence.words.size(); ++w) out << sentence.words[w] << ' ' << predicted[i][w] << '\n';
    out << '\n';
  }
  out.close();
  BERT_CHECK(out, bert::Code::io, "cannot write '", path, "'");
  return cut;
}

bool predict_conll_tags(bert_session* s, const bert::ConllFeatures& f, const std::vector<std::string>& labels,
                        int chunk, std::vector<std::vector<std::string>>& predicted, InferTiming* timing) {
  const size_t L = labels.size(), S = static_cast<size_t>(f.seq_length);
  std::vector<float> logits;
  const bool ok = infer_rows(
      s, f.count, S * L, chunk,
      [&f](const std::vector<int32_t>& rows, BatchStorage& st) { return conll_batch(f, rows, false, st); }, logits,
      timing);
  if (!ok) return false;
  predicted.assign(static_cast<size_t>(f.count), {});
  for (size_t i = 0; i < predicted.size(); ++i) {
    for (int32_t pos : f.word_start[i]) {
      const float* row = logits.data() + (i * S + pos) * L;
      predicted[i].push_back(labels[std::max_element(row, row + L) - row]);
    }
  }
  return true;
}

}  // namespace bert_tools
