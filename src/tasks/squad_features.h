// SQuAD examples into model features as Google's run_squad.py and Hugging Face's
// squad_convert_examples_to_features build them: doc words WordPiece-tokenised one by one, the
// question cut to max_query_length pieces, windows "[CLS] question [SEP] doc piece window [SEP]"
// (segment 1 from the window on) that start every doc_stride pieces until one reaches the end,
// padded to max_seq_length; per window position the doc word it came from and whether this window
// is the piece's "max context" one (most context on its shorter side, + 0.01 x window length; the
// first window wins ties). Training: the answer's pieces (narrowed to the span whose pieces equal
// the tokenised answer text, _improve_answer_span), as positions in each window; a window without
// the whole answer, or an impossible (v2.0) question, points at [CLS] (position 0).
#pragma once

#include <cstdint>
#include <vector>

#include "tasks/squad_examples.h"
#include "text/tokenizer.h"

namespace bert {

struct SquadFeatureOptions {
  int max_seq_length = 384;
  int doc_stride = 128;
  int max_query_length = 64;
};

// One window of one question.
struct SquadWindow {
  int example = 0;             // index into SquadFile::examples
  int doc_start = 0;           // index of the window's first piece among the context's pieces
  int doc_offset = 0;          // its position in the sequence (question pieces + 2)
  int length = 0;              // positions before the padding
  bool is_impossible = false;  // the question's, or (training) the answer is not inside this window
  std::vector<int32_t> token_to_word;  // per window piece: the doc word it came from
  std::vector<uint8_t> max_context;    // per window piece: 1 when this is its max-context window
};

struct SquadFeatures {
  int count = 0, seq_length = 0;
  std::vector<int32_t> input_ids, segment_ids, input_mask;  // [count, seq_length]
  std::vector<int32_t> start_positions, end_positions;       // [count]; 0 when not training
  std::vector<SquadWindow> windows;                          // [count]
  int64_t skipped = 0;  // training questions left out: the answer text is not in its doc words
};

// Error(invalid_argument) unless max_query_length >= 1, doc_stride >= 1 and max_seq_length
// leaves doc_stride pieces beside a full question (max_query_length + 3 + doc_stride).
void check_squad_options(const SquadFeatureOptions& options);

// Features of every question of `file`, in order. `training` sets the answer positions (the
// file must have been read for training) and, as the reference scripts do, leaves out (counting
// them in `skipped`) questions whose whitespace-normalised answer text is not found in the doc
// words the answer position covers.
SquadFeatures squad_features(const SquadFile& file, const Tokenizer& tokenizer, const SquadFeatureOptions& options,
                             bool training);

}  // namespace bert
