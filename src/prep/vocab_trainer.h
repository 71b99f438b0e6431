// bert-prep vocab: learns a WordPiece vocabulary from raw text. Words come from the same basic
// tokenizer the model will use (cased or uncased); pieces are learned by greedy pair merging
// (the procedure of Hugging Face's WordPieceTrainer: BPE over characters with "##" marking
// non-initial pieces), then written in BERT's layout: [PAD]=0, [unused0..98]=1..99, [UNK]=100,
// [CLS]=101, [SEP]=102, [MASK]=103, single characters, then merged pieces in merge order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bert {

// The smallest vocabulary the trainer makes: BERT's special tokens and unused slots fill the
// first rows.
constexpr size_t kMinVocabSize = 128;

struct VocabTrainOptions {
  std::vector<std::string> inputs;  // files or directories (*.txt, recursive)
  size_t vocab_size = 30522;
  bool lower_case = true;
  uint64_t min_frequency = 2;   // pairs (and characters) seen fewer times are not learned
  size_t limit_alphabet = 1000; // most frequent characters kept
  int max_word_chars = 100;     // longer words are skipped (they become [UNK] anyway)
  int threads = 0;              // 0: all cores
};

struct VocabTrainSummary {
  uint64_t files = 0, bytes = 0, words = 0, distinct_words = 0, invalid_utf8 = 0;
  uint64_t alphabet = 0, merges = 0, unused_filled = 0;
  double count_seconds = 0, merge_seconds = 0;
};

// Returns the tokens of the vocabulary in id order (exactly vocab_size of them).
std::vector<std::string> train_wordpiece_vocab(const VocabTrainOptions& options, VocabTrainSummary& summary);

}  // namespace bert
