// SQuAD v1.1 / v2.0 exact match and F1 (see squad_metrics.h). Unicode-aware where Python is:
// lower-casing and word characters (for the article boundaries) and whitespace use utf8proc.
#include "tasks/squad_metrics.h"

#include <algorithm>
#include <cstring>

#include <utf8proc.h>

#include "core/error.h"

namespace bert {
namespace {

enum class Shape { list, string };

// obj[key] of the expected shape; Error(data) naming where ("data[0].paragraphs[2].qas[1]") otherwise.
const nlohmann::json& member(const nlohmann::json& obj, const char* key, const std::string& where, Shape shape) {
  if (!obj.is_object()) fail(Code::data, where, " must be an object");
  const auto it = obj.find(key);
  if (it == obj.end()) fail(Code::data, where, ".", key, " is missing");
  if (shape == Shape::list ? !it->is_array() : !it->is_string()) {
    fail(Code::data, where, ".", key, " must be a ", shape == Shape::list ? "list" : "string");
  }
  return *it;
}

std::u32string decode(const std::string& s) {
  std::u32string out;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {  // an invalid byte: kept as U+FFFD, as Python's decode(errors="replace")
      cp = 0xFFFD;
      n = 1;
    }
    out.push_back(static_cast<char32_t>(cp));
    p += n;
    left -= n;
  }
  return out;
}

std::string encode(const std::u32string& s) {
  std::string out;
  utf8proc_uint8_t buf[4];
  for (char32_t c : s) out.append(reinterpret_cast<char*>(buf), utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf));
  return out;
}

bool is_space(char32_t c) {  // Python's str.isspace()
  if (c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f) || c == 0x85) return true;
  const utf8proc_category_t k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  const utf8proc_propval_t bidi = utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->bidi_class;
  return k == UTF8PROC_CATEGORY_ZS || bidi == UTF8PROC_BIDI_CLASS_WS || bidi == UTF8PROC_BIDI_CLASS_B ||
         bidi == UTF8PROC_BIDI_CLASS_S;
}

bool is_word(char32_t c) {  // \w in Python's re (Unicode): alphanumerics and underscore
  if (c == '_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

std::vector<std::string> tokens(const std::string& text) {
  std::vector<std::string> out;
  const std::string n = squad_normalize(text);
  size_t begin = 0;
  while (begin < n.size()) {
    size_t end = n.find(' ', begin);
    if (end == std::string::npos) end = n.size();
    if (end > begin) out.push_back(n.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

}  // namespace

std::string squad_normalize(const std::string& text) {
  // lower, then remove_punc (string.punctuation), remove_articles, white_space_fix
  std::u32string s;
  for (char32_t c : decode(text)) {
    c = static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
    if (c < 128 && std::strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", static_cast<char>(c)) && c != 0) continue;
    s.push_back(c);
  }
  std::u32string no_articles;
  for (size_t i = 0; i < s.size();) {
    bool replaced = false;
    if (i == 0 || !is_word(s[i - 1])) {
      for (const std::u32string article : {U"the", U"an", U"a"}) {
        const size_t end = i + article.size();
        if (s.compare(i, article.size(), article) == 0 && (end == s.size() || !is_word(s[end]))) {
          no_articles.push_back(' ');
          i = end;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) no_articles.push_back(s[i++]);
  }
  std::u32string out;
  for (size_t i = 0; i < no_articles.size();) {
    while (i < no_articles.size() && is_space(no_articles[i])) ++i;
    size_t j = i;
    while (j < no_articles.size() && !is_space(no_articles[j])) ++j;
    if (j > i) {
      if (!out.empty()) out.push_back(' ');
      out.append(no_articles, i, j - i);
    }
    i = j;
  }
  return encode(out);
}

double squad_exact(const std::string& prediction, const std::string& gold) {
  return squad_normalize(prediction) == squad_normalize(gold) ? 1.0 : 0.0;
}

double squad_f1(const std::string& prediction, const std::string& gold, bool v2) {
  std::vector<std::string> p = tokens(prediction), g = tokens(gold);
  if (v2 && (p.empty() || g.empty())) return p == g ? 1.0 : 0.0;
  std::map<std::string, int> count;
  for (const std::string& t : g) ++count[t];
  int same = 0;
  for (const std::string& t : p) {
    auto it = count.find(t);
    if (it != count.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / p.size(), recall = static_cast<double>(same) / g.size();
  return 2 * precision * recall / (precision + recall);
}

nlohmann::json squad_evaluate(const nlohmann::json& dataset, const nlohmann::json& predictions) {
  BERT_CHECK(dataset.is_object() && dataset.contains("data") && dataset["data"].is_array(), Code::data,
             "a SQuAD dataset is an object with a \"data\" list");
  BERT_CHECK(predictions.is_object(), Code::data, "SQuAD predictions are an object {question id: answer}");
  const bool v2 = dataset.value("version", "") == "v2.0";
  double exact = 0, f1 = 0, has_exact = 0, has_f1 = 0, no_exact = 0, no_f1 = 0;
  int64_t total = 0, has = 0, no = 0;
  const nlohmann::json& data = dataset["data"];
  for (size_t a = 0; a < data.size(); ++a) {
    const std::string article = "data[" + std::to_string(a) + "]";
    for (const auto& [p, paragraph] : member(data[a], "paragraphs", article, Shape::list).items()) {
      const std::string where = article + ".paragraphs[" + p + "]";
      for (const auto& [q, qa] : member(paragraph, "qas", where, Shape::list).items()) {
        const std::string question = where + ".qas[" + q + "]";
        const std::string id = member(qa, "id", question, Shape::string).get<std::string>();
        std::vector<std::string> golds;
        const nlohmann::json& answers = member(qa, "answers", question + " (question '" + id + "')", Shape::list);
        for (const auto& [i, a] : answers.items()) {
          const std::string text =
              member(a, "text", question + ".answers[" + i + "] (question '" + id + "')", Shape::string).get<std::string>();
          if (!v2 || !squad_normalize(text).empty()) golds.push_back(text);
        }
        if (v2 && golds.empty()) golds.push_back("");
        // evaluate-v1.1 takes the max over the gold answers (an empty list is its ValueError).
        BERT_CHECK(!golds.empty(), Code::data, "question '", id,
                   "' has no answers: a v1.1 question needs at least one (v2.0 marks unanswerable ones)");
        ++total;
        if (!predictions.contains(id)) {
          BERT_CHECK(!v2, Code::data, "no prediction for question '", id, "'");
          continue;  // v1.1: "Unanswered question ... will receive score 0."
        }
        BERT_CHECK(predictions[id].is_string(), Code::data, "the prediction for question '", id, "' is not a string");
        const std::string pred = predictions[id].get<std::string>();
        double e = 0, f = 0;
        for (const std::string& g : golds) {
          e = std::max(e, squad_exact(pred, g));
          f = std::max(f, squad_f1(pred, g, v2));
        }
        exact += e;
        f1 += f;
        const bool answerable = !golds[0].empty();
        if (v2 && answerable) has_exact += e, has_f1 += f, ++has;
        if (v2 && !answerable) no_exact += e, no_f1 += f, ++no;
      }
    }
  }
  BERT_CHECK(total > 0, Code::data, "the SQuAD dataset has no questions");
  if (!v2) return {{"exact_match", 100.0 * exact / total}, {"f1", 100.0 * f1 / total}};
  nlohmann::json r = {{"exact", 100.0 * exact / total}, {"f1", 100.0 * f1 / total}, {"total", total}};
  if (has) r.update({{"HasAns_exact", 100.0 * has_exact / has}, {"HasAns_f1", 100.0 * has_f1 / has}, {"HasAns_total", has}});
  if (no) r.update({{"NoAns_exact", 100.0 * no_exact / no}, {"NoAns_f1", 100.0 * no_f1 / no}, {"NoAns_total", no}});
  return r;
}

}  // namespace bert
