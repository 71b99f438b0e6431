// GLUE TSV reading and feature building (see glue.h).
#include "tasks/glue.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>

#include "core/error.h"
#include "text/utf8.h"

namespace bert {
namespace {

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t tab = line.find('\t'); tab != std::string::npos; tab = line.find('\t', begin)) {
    out.push_back(line.substr(begin, tab - begin));
    begin = tab + 1;
  }
  out.push_back(line.substr(begin));
  return out;
}

std::string normalised(std::string name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Error(data) naming the file and line unless `text` is valid UTF-8 (as the JSON readers refuse it).
void check_utf8(const std::string& path, int64_t line_no, const std::string& text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    bool invalid = false;
    decode_utf8(p, text.size(), i, &invalid);
    if (invalid) fail(Code::data, "GLUE file '", path, "' line ", line_no, " is not valid UTF-8 (byte ", i, ")");
  }
}

}  // namespace

GlueTask glue_task(const std::string& name) {
  const std::vector<std::string> binary = {"0", "1"}, nli2 = {"entailment", "not_entailment"};
  static const std::map<std::string, GlueTask> tasks = {
      {"cola", {"cola", binary, "matthews", "sentence", "", "label", "dev.tsv"}},
      {"sst2", {"sst-2", binary, "accuracy", "sentence", "", "label", "dev.tsv"}},
      {"mrpc", {"mrpc", binary, "accuracy_f1", "#1 String", "#2 String", "Quality", "dev.tsv"}},
      {"stsb", {"sts-b", {}, "pearson_spearman", "sentence1", "sentence2", "score", "dev.tsv"}},
      {"qqp", {"qqp", binary, "accuracy_f1", "question1", "question2", "is_duplicate", "dev.tsv"}},
      {"mnli", {"mnli", {"contradiction", "entailment", "neutral"}, "accuracy", "sentence1", "sentence2", "gold_label",
                "dev_matched.tsv"}},
      {"mnlimm", {"mnli-mm", {"contradiction", "entailment", "neutral"}, "accuracy", "sentence1", "sentence2",
                  "gold_label", "dev_mismatched.tsv"}},
      {"qnli", {"qnli", nli2, "accuracy", "question", "sentence", "label", "dev.tsv"}},
      {"rte", {"rte", nli2, "accuracy", "sentence1", "sentence2", "label", "dev.tsv"}},
      {"wnli", {"wnli", binary, "accuracy", "sentence1", "sentence2", "label", "dev.tsv"}},
  };
  auto it = tasks.find(normalised(name));
  if (it == tasks.end()) {
    fail(Code::invalid_argument, "unknown GLUE task '", name,
         "' (tasks: cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli)");
  }
  return it->second;
}

std::vector<GlueExample> read_glue_tsv(const GlueTask& task, const std::string& path, int64_t* skipped) {
  std::ifstream in(path);
  if (!in) fail(Code::io, "cannot open GLUE file '", path, "'");
  std::string line;
  std::vector<std::string> header;
  int col_a = -1, col_b = -1, col_label = -1, col_id = -1;
  int64_t line_no = 0;
  if (!std::getline(in, line)) fail(Code::data, "GLUE file '", path, "' is empty");
  ++line_no;
  const std::string first_line = line;
  std::vector<std::string> first = split_tabs(line);
  const bool cola_headerless = task.name == "cola" && first.size() == 4;  // source, label, original label, sentence
  if (cola_headerless) {
    col_label = 1;
    col_a = 3;
  } else {
    for (size_t i = 0; i < first.size(); ++i) {
      const std::string& h = first[i];
      if (h == task.text_a && col_a < 0) col_a = static_cast<int>(i);
      else if (!task.text_b.empty() && h == task.text_b) col_b = static_cast<int>(i);
      else if (h == task.label) col_label = static_cast<int>(i);
      else if ((h == "index" || h == "id" || h == "pairID") && col_id < 0) col_id = static_cast<int>(i);
    }
    if (col_a < 0 || (!task.text_b.empty() && col_b < 0)) {
      fail(Code::data, "GLUE file '", path, "' line 1: the header has no column '", col_a < 0 ? task.text_a : task.text_b,
           "' of task ", task.name, " (header: ", line, ")");
    }
  }
  const int needed = std::max({col_a, col_b, col_label});
  std::vector<GlueExample> out;
  int64_t bad = 0, row = 0;  // row: the data row's own index, bad rows counted (the id without an id column)
  auto add = [&](const std::vector<std::string>& cols) {
    const int64_t index = row++;
    if (static_cast<int>(cols.size()) <= needed) {
      ++bad;
      return;
    }
    GlueExample e;
    e.id = col_id >= 0 ? cols[col_id] : std::to_string(index);
    e.text_a = cols[col_a];
    if (col_b >= 0) e.text_b = cols[col_b];
    if (col_label >= 0) {
      const std::string& v = cols[col_label];
      if (task.regression()) {
        char* end = nullptr;
        e.value = std::strtof(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !std::isfinite(e.value)) {
          fail(Code::data, "GLUE file '", path, "' line ", line_no, ": score '", v, "' is not a number");
        }
      } else {
        auto it = std::find(task.labels.begin(), task.labels.end(), v);
        if (it == task.labels.end()) {
          fail(Code::data, "GLUE file '", path, "' line ", line_no, ": label '", v, "' is not one of task ", task.name,
               "'s labels");
        }
        e.label = static_cast<int32_t>(it - task.labels.begin());
      }
    }
    out.push_back(std::move(e));
  };
  check_utf8(path, 1, first_line);
  if (cola_headerless) add(first);
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    check_utf8(path, line_no, line);
    add(split_tabs(line));
  }
  if (skipped) *skipped = bad;
  return out;
}

GlueFeatures glue_features(const std::vector<GlueExample>& examples, const Tokenizer& tokenizer, int max_seq_length) {
  const Vocab& v = tokenizer.vocab();
  BERT_CHECK(max_seq_length >= 3, Code::invalid_argument, "max_seq_length ", max_seq_length, " leaves no room for text");
  GlueFeatures f;
  f.count = static_cast<int>(examples.size());
  f.seq_length = max_seq_length;
  const size_t total = static_cast<size_t>(f.count) * max_seq_length;
  f.input_ids.assign(total, v.pad_id);
  f.segment_ids.assign(total, 0);
  f.input_mask.assign(total, 0);
  std::vector<int32_t> a, b;
  for (int i = 0; i < f.count; ++i) {
    const GlueExample& e = examples[i];
    a.clear();
    b.clear();
    tokenizer.encode(e.text_a, a);
    const bool pair = !e.text_b.empty();
    if (pair) tokenizer.encode(e.text_b, b);
    const size_t room = static_cast<size_t>(max_seq_length) - (pair ? 3 : 2);
    while (a.size() + b.size() > room) (a.size() > b.size() ? a : b).pop_back();
    int32_t* ids = f.input_ids.data() + static_cast<size_t>(i) * max_seq_length;
    int32_t* seg = f.segment_ids.data() + static_cast<size_t>(i) * max_seq_length;
    int32_t* mask = f.input_mask.data() + static_cast<size_t>(i) * max_seq_length;
    int n = 0;
    auto put = [&](int32_t id, int32_t segment) {
      ids[n] = id;
      seg[n] = segment;
      mask[n] = 1;
      ++n;
    };
    put(v.cls_id, 0);
    for (int32_t id : a) put(id, 0);
    put(v.sep_id, 0);
    if (pair) {
      for (int32_t id : b) put(id, 1);
      put(v.sep_id, 1);
    }
    f.labels.push_back(e.label);
    f.values.push_back(e.value);
  }
  return f;
}

}  // namespace bert
