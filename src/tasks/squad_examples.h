// SQuAD v1.1 / v2.0 files ({"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id",
// "question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}) read into examples as
// Google's run_squad.py and Hugging Face's SquadV1Processor / SquadV2Processor read them: the
// context split into doc words on whitespace (space, tab, CR, LF, U+202F), and for training the
// first answer's first and last doc word from answer_start (in code points) and the answer's
// length. Every malformed value is an Error(data) naming the file, the key's path and the question.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bert {

struct SquadExample {
  std::string qas_id, question;
  int paragraph = 0;                   // index into SquadFile::paragraph_words (its context)
  bool is_impossible = false;          // v2.0: no answer in the context
  // Training examples that have an answer: its text and its first and last doc word.
  std::string answer_text;
  int start_word = -1, end_word = -1;
};

struct SquadFile {
  nlohmann::json json;  // the whole file, for the official EM/F1 (null when read for training)
  std::vector<std::vector<std::string>> paragraph_words;  // each context's whitespace-separated words
  std::vector<SquadExample> examples;                     // every question, in file order
  bool v2 = false;  // "version": "v2.0", or some question is_impossible (json's version set to v2.0 then)
  bool has_answers = true;  // EM/F1 can be computed: every question has an "answers" list, not empty in v1.1
};

// Reads a SQuAD file; `training` reads each answerable question's first answer (required then),
// otherwise "answers" is optional. Error(io) if unreadable; Error(data) for invalid JSON or
// UTF-8, a missing key or a wrong type (naming the key's path, e.g. data[0].paragraphs[3].qas[1].
// answers[0].answer_start, and the question id), answer_start outside the context, an empty
// context or a duplicated question id.
SquadFile read_squad_file(const std::string& path, bool training);

}  // namespace bert
