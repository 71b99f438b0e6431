// CoNLL token classification in bert-finetune and bert-predict: engine batches of sentences
// (labels [B, S] for training) and each kept word's predicted tag from bert_infer's logits.
#pragma once

#include <string>
#include <vector>

#include "bert.h"
#include "tasks/conll.h"
#include "finetune_common.h"

namespace bert_tools {

// Rows of a CoNLL feature set as a token-classification batch (labels [B, S] when `with_labels`).
bert_batch conll_batch(const bert::ConllFeatures& f, const std::vector<int32_t>& rows, bool with_labels,
                       BatchStorage& storage);

// Writes the sentences as a CoNLL file, "word tag" lines and a blank line after each sentence,
// with the predicted tags; a word past the sequence length is tagged O (`predicted` is extended
// to every word). Returns how many words were past it. Throws bert::Error when it cannot write.
int64_t write_conll_predictions(const std::vector<bert::ConllSentence>& sentences,
                                std::vector<std::vector<std::string>>& predicted, const std::string& path);

// Per sentence, the tag (from `labels`) of each word whose first piece fits in the sequence, in
// chunks of `chunk` sentences. Returns false (after printing the error) when a call fails.
bool predict_conll_tags(bert_session* s, const bert::ConllFeatures& f, const std::vector<std::string>& labels,
                        int chunk, std::vector<std::vector<std::string>>& predicted, InferTiming* timing);

}  // namespace bert_tools
