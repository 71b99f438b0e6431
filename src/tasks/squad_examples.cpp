// SQuAD JSON into examples (see squad_examples.h).
#include "tasks/squad_examples.h"

#include <fstream>
#include <set>

#include "core/error.h"
#include "text/utf8.h"

namespace bert {
namespace {

using nlohmann::json;

enum class Kind { object, list, string, integer, boolean };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::object: return "an object";
    case Kind::list: return "a list";
    case Kind::string: return "a string";
    case Kind::integer: return "an integer";
    case Kind::boolean: return "true or false";
  }
  return "";
}

bool is_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::object: return v.is_object();
    case Kind::list: return v.is_array();
    case Kind::string: return v.is_string();
    case Kind::integer: return v.is_number_integer();
    case Kind::boolean: return v.is_boolean();
  }
  return false;
}

// Where in the file a value sits, for errors: "data[0].paragraphs[2].qas[1]" and the question id.
struct Place {
  const std::string& file;
  std::string path;
  std::string question;  // empty outside a question

  [[noreturn]] void error(const std::string& key, const std::string& what) const {
    fail(Code::data, "SQuAD file '", file, "': ", path, path.empty() || key.empty() ? "" : ".", key,
         question.empty() ? "" : " (question '" + question + "')", " ", what);
  }
  const json& get(const json& object, const std::string& key, Kind kind) const {
    auto it = object.find(key);
    if (it == object.end()) error(key, "is missing");
    if (!is_kind(*it, kind)) error(key, std::string("must be ") + kind_name(kind));
    return *it;
  }
  Place at(const std::string& key, size_t index) const {
    return {file, path + (path.empty() ? "" : ".") + key + "[" + std::to_string(index) + "]", question};
  }
};

// Whitespace of the SQuAD readers' context splitting (run_squad.py's is_whitespace).
bool is_context_space(char32_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F; }

// The context's words and, per code point, the index of the word it belongs to (the previous
// word for whitespace; -1 before the first word).
void split_context(const std::string& context, std::vector<std::string>& words, std::vector<int>& char_to_word) {
  const auto* s = reinterpret_cast<const unsigned char*>(context.data());
  bool after_space = true;
  for (size_t i = 0; i < context.size();) {
    const size_t begin = i;
    bool invalid = false;
    const char32_t c = decode_utf8(s, context.size(), i, &invalid);
    if (is_context_space(c)) {
      after_space = true;
    } else {
      if (after_space) words.emplace_back();
      words.back().append(context, begin, i - begin);
      after_space = false;
    }
    char_to_word.push_back(static_cast<int>(words.size()) - 1);
  }
}

// `text` with each byte of an invalid UTF-8 sequence written as \xNN (parser messages quote the input).
std::string escape_invalid_utf8(const std::string& text) {
  std::string out;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const size_t begin = i;
    bool invalid = false;
    decode_utf8(s, text.size(), i, &invalid);
    if (!invalid) {
      out.append(text, begin, i - begin);
      continue;
    }
    for (size_t k = begin; k < i; ++k) {
      static const char* hex = "0123456789ABCDEF";
      out += {'\\', 'x', hex[s[k] >> 4], hex[s[k] & 15]};
    }
  }
  return out;
}

}  // namespace

SquadFile read_squad_file(const std::string& path, bool training) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Code::io, "cannot open SQuAD file '", path, "'");
  SquadFile f;
  try {
    f.json = json::parse(in);
  } catch (const json::exception& e) {
    fail(Code::data, "SQuAD file '", path, "' is not valid JSON in UTF-8: ", escape_invalid_utf8(e.what()));
  }
  const Place top{path, "", ""};
  if (!f.json.is_object()) top.error("", "must be an object with a \"data\" list");
  const json& data = top.get(f.json, "data", Kind::list);
  f.v2 = f.json.contains("version") && f.json["version"] == "v2.0";
  std::set<std::string> ids;
  bool has_empty_answers = false;  // an answerable question with "answers": [] (no v1.1 EM/F1 then)
  for (size_t a = 0; a < data.size(); ++a) {
    const Place article = top.at("data", a);
    if (!data[a].is_object()) article.error("", "must be an object");
    const json& paragraphs = article.get(data[a], "paragraphs", Kind::list);
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      const Place paragraph = article.at("paragraphs", p);
      if (!paragraphs[p].is_object()) paragraph.error("", "must be an object");
      const std::string& context = paragraph.get(paragraphs[p], "context", Kind::string).get_ref<const std::string&>();
      const json& qas = paragraph.get(paragraphs[p], "qas", Kind::list);
      std::vector<std::string> words;
      std::vector<int> char_to_word;
      split_context(context, words, char_to_word);
      const int paragraph_index = static_cast<int>(f.paragraph_words.size());
      for (size_t q = 0; q < qas.size(); ++q) {
        Place place = paragraph.at("qas", q);
        if (!qas[q].is_object()) place.error("", "must be an object");
        SquadExample e;
        e.qas_id = place.get(qas[q], "id", Kind::string).get<std::string>();
        place.question = e.qas_id;
        if (!ids.insert(e.qas_id).second) place.error("id", "is used by an earlier question too");
        e.question = place.get(qas[q], "question", Kind::string).get<std::string>();
        if (words.empty()) place.error("", "has a context without words");
        e.paragraph = paragraph_index;
        if (qas[q].contains("is_impossible")) e.is_impossible = place.get(qas[q], "is_impossible", Kind::boolean).get<bool>();
        f.v2 = f.v2 || e.is_impossible;
        if (!qas[q].contains("answers")) {
          if (training && !e.is_impossible) place.error("answers", "is missing");
          f.has_answers = false;
        } else {
          const json& answers = place.get(qas[q], "answers", Kind::list);
          if (answers.empty() && !e.is_impossible) has_empty_answers = true;
          const auto chars = static_cast<int64_t>(char_to_word.size());
          for (size_t i = 0; i < answers.size(); ++i) {  // every answer, for evaluation too
            const Place answer = place.at("answers", i);
            if (!answers[i].is_object()) answer.error("", "must be an object");
            answer.get(answers[i], "text", Kind::string);
            const int64_t start = answer.get(answers[i], "answer_start", Kind::integer).get<int64_t>();
            if (start < 0 || start >= chars) {
              answer.error("answer_start", "= " + std::to_string(start) + " is outside the context (" +
                                               std::to_string(chars) + " characters)");
            }
          }
          if (training && !e.is_impossible) {
            if (answers.empty()) place.error("answers", "is empty (a training question needs an answer)");
            const Place answer = place.at("answers", 0);
            e.answer_text = answers[0]["text"].get<std::string>();
            const int64_t start = answers[0]["answer_start"].get<int64_t>();
            const int64_t length = static_cast<int64_t>(utf8_length(e.answer_text.data(), e.answer_text.size()));
            if (length == 0) answer.error("text", "is empty");
            e.start_word = char_to_word[start];
            e.end_word = char_to_word[std::min(start + length - 1, chars - 1)];
            if (e.start_word < 0) {
              answer.error("answer_start", "= " + std::to_string(start) + " points at the whitespace before the context's first word");
            }
          }
        }
        f.examples.push_back(std::move(e));
      }
      f.paragraph_words.push_back(std::move(words));
    }
  }
  if (f.examples.empty()) top.error("data", "holds no questions");
  if (f.v2) f.json["version"] = "v2.0";  // scored by evaluate-v2.0's rules
  if (has_empty_answers && !f.v2) f.has_answers = false;
  if (training) f.json = nullptr;
  return f;
}

}  // namespace bert
