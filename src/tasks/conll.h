// CoNLL-style token files for token classification (NER): one "word ... TAG" line per token
// (whitespace-separated, the tag in the last column), blank lines between sentences,
// -DOCSTART- lines skipped, as CoNLL-2003's files. Words become word pieces; the first piece of
// a word carries its tag, the others and [CLS]/[SEP] carry -100 (left out of the loss), as Hugging
// Face's run_ner does. Entity-level precision/recall/F1 over BIO chunks as conlleval/seqeval count them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace bert {

struct ConllSentence {
  std::vector<std::string> words, tags;
};

// Reads a CoNLL file. Error(io) if unreadable, Error(data) naming file and line for a line
// with fewer than two columns.
std::vector<ConllSentence> read_conll(const std::string& path);
// Tags in order of first appearance over the sentences.
std::vector<std::string> conll_labels(const std::vector<ConllSentence>& sentences);

struct ConllFeatures {
  int count = 0, seq_length = 0;
  std::vector<int32_t> input_ids, segment_ids, input_mask, labels;  // [count, seq_length]
  std::vector<std::vector<int32_t>> word_start;  // per sentence: the position of each kept word's first piece
};
// Error(data) for a tag not in `labels`. Words past max_seq_length - 2 pieces are cut off.
ConllFeatures conll_features(const std::vector<ConllSentence>& sentences, const std::vector<std::string>& labels,
                             const Tokenizer& tokenizer, int max_seq_length);

struct EntityScores {
  double precision = 0, recall = 0, f1 = 0;
  int64_t gold = 0, predicted = 0, correct = 0;
};
// Chunks of BIO tags (B-X begins; I-X continues a chunk of type X, and begins one after O or
// another type, as conlleval does), compared as (type, first word, last word).
EntityScores entity_scores(const std::vector<std::vector<std::string>>& gold,
                           const std::vector<std::vector<std::string>>& predicted);

}  // namespace bert
