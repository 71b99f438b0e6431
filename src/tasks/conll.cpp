// CoNLL token files, word-piece features with first-piece labels, entity-level scores (conll.h).
#include "tasks/conll.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "core/error.h"

namespace bert {

std::vector<ConllSentence> read_conll(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(Code::io, "cannot open CoNLL file '", path, "'");
  std::vector<ConllSentence> out(1);
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream cols(line);
    std::vector<std::string> c;
    for (std::string v; cols >> v;) c.push_back(v);
    if (c.empty() || c[0] == "-DOCSTART-") {
      if (!out.back().words.empty()) out.emplace_back();
      continue;
    }
    if (c.size() < 2) fail(Code::data, "CoNLL file '", path, "' line ", line_no, ": '", line, "' has no tag column");
    out.back().words.push_back(c.front());
    out.back().tags.push_back(c.back());
  }
  if (out.back().words.empty()) out.pop_back();
  return out;
}

std::vector<std::string> conll_labels(const std::vector<ConllSentence>& sentences) {
  std::vector<std::string> labels;
  for (const ConllSentence& s : sentences) {
    for (const std::string& t : s.tags) {
      if (std::find(labels.begin(), labels.end(), t) == labels.end()) labels.push_back(t);
    }
  }
  return labels;
}

ConllFeatures conll_features(const std::vector<ConllSentence>& sentences, const std::vector<std::string>& labels,
                             const Tokenizer& tokenizer, int max_seq_length) {
  const Vocab& v = tokenizer.vocab();
  BERT_CHECK(max_seq_length >= 3, Code::invalid_argument, "max_seq_length ", max_seq_length, " leaves no room for words");
  ConllFeatures f;
  f.count = static_cast<int>(sentences.size());
  f.seq_length = max_seq_length;
  const size_t total = static_cast<size_t>(f.count) * max_seq_length;
  f.input_ids.assign(total, v.pad_id);
  f.segment_ids.assign(total, 0);
  f.input_mask.assign(total, 0);
  f.labels.assign(total, -100);
  std::vector<int32_t> pieces;
  for (int i = 0; i < f.count; ++i) {
    const size_t row = static_cast<size_t>(i) * max_seq_length;
    int n = 0;
    auto put = [&](int32_t id, int32_t label) {
      f.input_ids[row + n] = id;
      f.input_mask[row + n] = 1;
      f.labels[row + n] = label;
      ++n;
    };
    put(v.cls_id, -100);
    std::vector<int32_t> starts;
    const ConllSentence& s = sentences[i];
    for (size_t w = 0; w < s.words.size(); ++w) {
      pieces.clear();
      tokenizer.encode(s.words[w], pieces);
      if (pieces.empty()) pieces.push_back(v.unk_id);
      if (n + static_cast<int>(pieces.size()) > max_seq_length - 1) break;
      auto it = std::find(labels.begin(), labels.end(), s.tags[w]);
      if (it == labels.end()) fail(Code::data, "CoNLL tag '", s.tags[w], "' is not one of the task's labels");
      starts.push_back(n);
      for (size_t p = 0; p < pieces.size(); ++p) put(pieces[p], p == 0 ? static_cast<int32_t>(it - labels.begin()) : -100);
    }
    put(v.sep_id, -100);
    f.word_start.push_back(std::move(starts));
  }
  return f;
}

namespace {

using Chunk = std::tuple<std::string, size_t, size_t>;  // type, first word, last word

std::set<Chunk> chunks(const std::vector<std::string>& tags) {
  std::set<Chunk> out;
  std::string type;  // the open chunk's type ("": none)
  size_t begin = 0;
  for (size_t i = 0; i <= tags.size(); ++i) {
    std::string prefix, kind;
    if (i < tags.size() && tags[i].size() > 2 && tags[i][1] == '-') {
      prefix = tags[i].substr(0, 1);
      kind = tags[i].substr(2);
    }
    const bool continues = prefix == "I" && !type.empty() && kind == type;
    if (!type.empty() && !continues) {
      out.emplace(type, begin, i - 1);
      type.clear();
    }
    if (!prefix.empty() && !continues) {
      type = kind;
      begin = i;
    }
  }
  return out;
}

}  // namespace

EntityScores entity_scores(const std::vector<std::vector<std::string>>& gold,
                           const std::vector<std::vector<std::string>>& predicted) {
  BERT_CHECK(gold.size() == predicted.size(), Code::invalid_argument, "entity scores over ", gold.size(),
             " gold and ", predicted.size(), " predicted sentences");
  EntityScores s;
  for (size_t i = 0; i < gold.size(); ++i) {
    const std::set<Chunk> g = chunks(gold[i]), p = chunks(predicted[i]);
    s.gold += static_cast<int64_t>(g.size());
    s.predicted += static_cast<int64_t>(p.size());
    for (const Chunk& c : p) s.correct += g.count(c);
  }
  s.precision = s.predicted ? static_cast<double>(s.correct) / s.predicted : 0.0;
  s.recall = s.gold ? static_cast<double>(s.correct) / s.gold : 0.0;
  s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
  return s;
}

}  // namespace bert
