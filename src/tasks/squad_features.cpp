// SQuAD windows, max-context flags and answer positions (see squad_features.h).
#include "tasks/squad_features.h"

#include <algorithm>

#include "core/error.h"
#include "tasks/python_text.h"

namespace bert {
namespace {

// The pieces of one context: word pieces of each doc word, in order.
struct ContextPieces {
  std::vector<int32_t> ids;
  std::vector<int32_t> piece_to_word;  // [pieces]
  std::vector<int32_t> word_to_piece;  // [words]: the word's first piece
};

ContextPieces tokenize_context(const std::vector<std::string>& words, const Tokenizer& tokenizer) {
  ContextPieces c;
  for (size_t w = 0; w < words.size(); ++w) {
    c.word_to_piece.push_back(static_cast<int32_t>(c.ids.size()));
    tokenizer.encode(words[w], c.ids);
    c.piece_to_word.resize(c.ids.size(), static_cast<int32_t>(w));
  }
  return c;
}

std::string join_words(const std::vector<std::string>& words, int first, int last) {
  std::string out;
  for (int w = first; w <= last; ++w) out += (w > first ? " " : "") + words[w];
  return out;
}

// The narrowest [start, end] inside the given span whose pieces are the answer text's pieces
// (the first found scanning starts forward, ends backward), or the span itself.
std::pair<int, int> improve_answer_span(const std::vector<int32_t>& doc, int start, int end,
                                        const std::vector<int32_t>& answer) {
  for (int s = start; s <= end; ++s) {
    for (int e = end; e >= s; --e) {
      if (static_cast<size_t>(e - s + 1) == answer.size() && std::equal(answer.begin(), answer.end(), doc.begin() + s)) {
        return {s, e};
      }
    }
  }
  return {start, end};
}

}  // namespace

void check_squad_options(const SquadFeatureOptions& o) {
  BERT_CHECK(o.max_query_length >= 1 && o.doc_stride >= 1, Code::invalid_argument,
             "SQuAD max_query_length and doc_stride must be positive (got ", o.max_query_length, ", ", o.doc_stride, ")");
  BERT_CHECK(o.max_seq_length >= o.max_query_length + 3 + o.doc_stride, Code::invalid_argument, "SQuAD max_seq_length ",
             o.max_seq_length, " must hold a full question (max_query_length ", o.max_query_length,
             "), [CLS], two [SEP] and doc_stride ", o.doc_stride, " context pieces");
}

SquadFeatures squad_features(const SquadFile& file, const Tokenizer& tokenizer, const SquadFeatureOptions& o,
                             bool training) {
  check_squad_options(o);
  const Vocab& vocab = tokenizer.vocab();
  const int S = o.max_seq_length;
  SquadFeatures f;
  f.seq_length = S;
  int cached_paragraph = -1;
  ContextPieces context;
  std::vector<int32_t> query, answer;
  for (size_t x = 0; x < file.examples.size(); ++x) {
    const SquadExample& e = file.examples[x];
    const std::vector<std::string>& words = file.paragraph_words[e.paragraph];
    const bool answered = training && !e.is_impossible;
    if (answered) {
      BERT_CHECK(e.start_word >= 0, Code::invalid_argument, "question '", e.qas_id, "' was not read for training");
      if (join_words(words, e.start_word, e.end_word).find(python_split_join(e.answer_text)) == std::string::npos) {
        ++f.skipped;
        continue;
      }
    }
    if (e.paragraph != cached_paragraph) {
      context = tokenize_context(words, tokenizer);
      cached_paragraph = e.paragraph;
    }
    const int pieces = static_cast<int>(context.ids.size());
    BERT_CHECK(pieces > 0, Code::data, "question '", e.qas_id, "': its context has no word pieces");
    int answer_start = 0, answer_end = 0;
    if (answered) {
      answer_start = context.word_to_piece[e.start_word];
      answer_end = e.end_word + 1 < static_cast<int>(words.size()) ? context.word_to_piece[e.end_word + 1] - 1 : pieces - 1;
      answer.clear();
      tokenizer.encode(e.answer_text, answer);
      std::tie(answer_start, answer_end) = improve_answer_span(context.ids, answer_start, answer_end, answer);
    }
    query.clear();
    tokenizer.encode(e.question, query);
    if (static_cast<int>(query.size()) > o.max_query_length) query.resize(o.max_query_length);
    const int q = static_cast<int>(query.size());
    const int room = S - q - 3;

    std::vector<std::pair<int, int>> spans;  // (doc_start, length)
    for (int start = 0;; start += o.doc_stride) {
      const int length = std::min(pieces - start, room);
      spans.emplace_back(start, length);
      if (start + length == pieces) break;
    }
    for (size_t w = 0; w < spans.size(); ++w) {
      const auto [doc_start, length] = spans[w];
      SquadWindow win;
      win.example = static_cast<int>(x);
      win.doc_start = doc_start;
      win.doc_offset = q + 2;
      win.length = q + length + 3;
      win.is_impossible = e.is_impossible;
      const size_t at = f.input_ids.size();
      f.input_ids.resize(at + S, vocab.pad_id);
      f.segment_ids.resize(at + S, 0);
      f.input_mask.resize(at + S, 0);
      int n = 0;
      auto put = [&](int32_t id, int32_t segment) {
        f.input_ids[at + n] = id;
        f.segment_ids[at + n] = segment;
        f.input_mask[at + n] = 1;
        ++n;
      };
      put(vocab.cls_id, 0);
      for (int32_t id : query) put(id, 0);
      put(vocab.sep_id, 0);
      for (int j = 0; j < length; ++j) {
        const int position = doc_start + j;
        put(context.ids[position], 1);
        win.token_to_word.push_back(context.piece_to_word[position]);
        double best_score = -1;
        size_t best = 0;
        for (size_t v = 0; v < spans.size(); ++v) {
          const int end = spans[v].first + spans[v].second - 1;
          if (position < spans[v].first || position > end) continue;
          const double score = std::min(position - spans[v].first, end - position) + 0.01 * spans[v].second;
          if (score > best_score) best_score = score, best = v;
        }
        win.max_context.push_back(best == w);
      }
      put(vocab.sep_id, 1);
      int start_position = 0, end_position = 0;
      if (answered) {
        if (answer_start >= doc_start && answer_end <= doc_start + length - 1) {
          start_position = answer_start - doc_start + win.doc_offset;
          end_position = answer_end - doc_start + win.doc_offset;
        } else {
          win.is_impossible = true;
        }
      }
      f.start_positions.push_back(start_position);
      f.end_positions.push_back(end_position);
      f.windows.push_back(std::move(win));
      ++f.count;
    }
  }
  return f;
}

}  // namespace bert
