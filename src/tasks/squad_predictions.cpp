// SQuAD n-best spans, final texts and null scores from logits (see squad_predictions.h).
#include "tasks/squad_predictions.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>

#include "core/error.h"
#include "tasks/python_text.h"
#include "text/utf8.h"

namespace bert {
namespace {

std::u32string decode(const std::string& s) {
  std::u32string out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    bool invalid = false;
    out.push_back(decode_utf8(p, s.size(), i, &invalid));
  }
  return out;
}

std::string encode(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

// The text without ' ' and, per kept character, its index in the text.
std::u32string strip_spaces(const std::u32string& text, std::vector<size_t>& kept_at) {
  std::u32string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == U' ') continue;
    kept_at.push_back(i);
    out.push_back(text[i]);
  }
  return out;
}

// Positions of the n highest values, highest first, ties in position order.
std::vector<int> best_indexes(const float* values, int count, int n) {
  std::vector<int> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return values[a] > values[b]; });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(n)));
  return order;
}

// " ".join(pieces).replace(" ##", "").replace("##", "") then whitespace-normalised, as Google's
// run_squad.py write_predictions cleans it (DLE's too). A span that starts on a "##" piece thus
// answers the partial word ("##ing" -> "ing", found inside the original word by
// squad_final_text); HF's compute_predictions_logits keeps that "##" and falls back to the whole word.
std::string detokenize(const Vocab& vocab, const int32_t* ids, int count) {
  std::string joined;
  for (int i = 0; i < count; ++i) joined += (i ? " " : "") + vocab.token(ids[i]);
  std::string out;
  for (size_t i = 0; i < joined.size();) {
    if (joined.compare(i, 3, " ##") == 0) {
      i += 3;
    } else if (joined.compare(i, 2, "##") == 0) {
      i += 2;
    } else {
      out += joined[i++];
    }
  }
  return python_split_join(out);
}

struct Candidate {
  int window = 0, start = 0, end = 0;
  double start_logit = 0, end_logit = 0;
};

struct Entry {
  std::string text;
  double start_logit = 0, end_logit = 0;
};

}  // namespace

std::string squad_final_text(const std::string& pred_text, const std::string& orig_text, const BasicTokenizer& basic) {
  std::string bytes;
  std::vector<uint32_t> ends;
  basic.split(orig_text, bytes, ends, nullptr);
  std::string joined;
  uint32_t begin = 0;
  for (uint32_t end : ends) {
    if (!joined.empty()) joined += ' ';
    joined.append(bytes, begin, end - begin);
    begin = end;
  }
  const std::u32string tok = decode(joined), pred = decode(pred_text), orig = decode(orig_text);
  const size_t start = tok.find(pred);
  if (start == std::u32string::npos || pred.empty()) return orig_text;
  const size_t end = start + pred.size() - 1;
  std::vector<size_t> orig_at, tok_at;
  const std::u32string orig_ns = strip_spaces(orig, orig_at), tok_ns = strip_spaces(tok, tok_at);
  if (orig_ns.size() != tok_ns.size()) return orig_text;
  // tok position -> stripped position; the ends of the prediction must not be spaces.
  auto stripped = [&](size_t position) -> long {
    auto it = std::lower_bound(tok_at.begin(), tok_at.end(), position);
    return it != tok_at.end() && *it == position ? static_cast<long>(it - tok_at.begin()) : -1;
  };
  const long ns_start = stripped(start), ns_end = stripped(end);
  if (ns_start < 0 || ns_end < 0) return orig_text;
  return encode(orig.substr(orig_at[ns_start], orig_at[ns_end] - orig_at[ns_start] + 1));
}

SquadPredictions squad_predictions(const SquadFile& file, const SquadFeatures& features, const float* logits,
                                   const Tokenizer& tokenizer, const SquadPredictionOptions& o) {
  BERT_CHECK(o.n_best >= 1 && o.max_answer_length >= 1, Code::invalid_argument,
             "SQuAD n_best and max_answer_length must be positive (got ", o.n_best, ", ", o.max_answer_length, ")");
  const int S = features.seq_length;
  SquadPredictions out;
  out.predictions = nlohmann::ordered_json::object();
  out.nbest = nlohmann::ordered_json::object();
  if (o.v2) out.null_odds = nlohmann::ordered_json::object();
  size_t first = 0;  // the example's first window; features hold examples in file order
  for (size_t x = 0; x < file.examples.size(); ++x) {
    while (first < features.windows.size() && features.windows[first].example < static_cast<int>(x)) ++first;
    size_t last = first;
    while (last < features.windows.size() && features.windows[last].example == static_cast<int>(x)) ++last;
    if (last == first) continue;  // a training question left out of the features
    const SquadExample& e = file.examples[x];
    const std::vector<std::string>& words = file.paragraph_words[e.paragraph];

    std::vector<Candidate> candidates;
    double score_null = 1000000;  // the lowest [CLS] score over the windows, and its window
    Candidate null;
    for (size_t w = first; w < last; ++w) {
      const SquadWindow& win = features.windows[w];
      const float* start_logits = logits + w * 2 * S;
      const float* end_logits = start_logits + S;
      if (o.v2) {
        const double score = static_cast<double>(start_logits[0]) + static_cast<double>(end_logits[0]);
        if (score < score_null) {
          score_null = score;
          null = {static_cast<int>(w), 0, 0, start_logits[0], end_logits[0]};
        }
      }
      const int context_end = win.doc_offset + static_cast<int>(win.token_to_word.size());  // exclusive
      // Only the window's real positions are ranked: bert_infer gives 0 at the padding, which would
      // otherwise crowd real spans with negative logits out of the n-best.
      const std::vector<int> starts = best_indexes(start_logits, win.length, o.n_best);
      const std::vector<int> ends = best_indexes(end_logits, win.length, o.n_best);
      for (int s : starts) {
        for (int t : ends) {
          if (s < win.doc_offset || s >= context_end || t < win.doc_offset || t >= context_end) continue;
          if (!win.max_context[s - win.doc_offset]) continue;
          if (t < s || t - s + 1 > o.max_answer_length) continue;
          candidates.push_back({static_cast<int>(w), s, t, start_logits[s], end_logits[t]});
        }
      }
    }
    if (o.v2) candidates.push_back(null);
    std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      return a.start_logit + a.end_logit > b.start_logit + b.end_logit;
    });

    std::vector<Entry> nbest;
    std::set<std::string> seen;
    for (const Candidate& c : candidates) {
      if (static_cast<int>(nbest.size()) >= o.n_best) break;
      std::string text;
      if (c.start > 0) {
        const SquadWindow& win = features.windows[c.window];
        const int32_t* ids = features.input_ids.data() + static_cast<size_t>(c.window) * S;
        const std::string tok_text = detokenize(tokenizer.vocab(), ids + c.start, c.end - c.start + 1);
        std::string orig_text;
        const int first_word = win.token_to_word[c.start - win.doc_offset];
        const int last_word = win.token_to_word[c.end - win.doc_offset];
        for (int i = first_word; i <= last_word; ++i) orig_text += (i > first_word ? " " : "") + words[i];
        text = squad_final_text(tok_text, orig_text, tokenizer.basic());
        if (!seen.insert(text).second) continue;
      } else {
        seen.insert(text);
      }
      nbest.push_back({text, c.start_logit, c.end_logit});
    }
    if (o.v2) {
      if (!seen.count("")) nbest.push_back({"", null.start_logit, null.end_logit});
      if (nbest.size() == 1) nbest.insert(nbest.begin(), Entry{"empty", 0.0, 0.0});
    }
    if (nbest.empty()) nbest.push_back({"empty", 0.0, 0.0});

    double max_score = -INFINITY;
    for (const Entry& n : nbest) max_score = std::max(max_score, n.start_logit + n.end_logit);
    std::vector<double> probs;
    double total = 0;
    for (const Entry& n : nbest) {
      probs.push_back(std::exp(n.start_logit + n.end_logit - max_score));
      total += probs.back();
    }
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    const Entry* best_non_null = nullptr;
    for (size_t i = 0; i < nbest.size(); ++i) {
      if (!best_non_null && !nbest[i].text.empty()) best_non_null = &nbest[i];
      list.push_back({{"text", nbest[i].text},
                      {"probability", probs[i] / total},
                      {"start_logit", nbest[i].start_logit},
                      {"end_logit", nbest[i].end_logit}});
    }
    if (!o.v2) {
      out.predictions[e.qas_id] = nbest[0].text;
    } else {
      const double diff = score_null - best_non_null->start_logit - best_non_null->end_logit;
      out.null_odds[e.qas_id] = diff;
      out.predictions[e.qas_id] = diff > o.null_score_diff_threshold ? "" : best_non_null->text;
    }
    out.nbest[e.qas_id] = std::move(list);
  }
  return out;
}

void write_squad_predictions(const SquadPredictions& p, bool v2, const std::string& dir) {
  auto write = [&](const nlohmann::ordered_json& value, const std::string& name) {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out << value.dump(4) << "\n";
    out.close();
    if (!out) fail(Code::io, "cannot write '", path, "'");
  };
  write(p.predictions, "predictions.json");
  write(p.nbest, "nbest_predictions.json");
  if (v2) write(p.null_odds, "null_odds.json");
}

}  // namespace bert
