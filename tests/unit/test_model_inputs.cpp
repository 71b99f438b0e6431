// build_model_inputs' token layouts: packed (unpad), padded to seq_length, and padded to the
// batch's longest used length rounded up to a multiple (data.pad_to_multiple, and the length bins
// of recorded CUDA-graph micro-batches), and the fixed MLM rows of recorded micro-batches.
#include <gtest/gtest.h>

#include <vector>

#include "model/model_inputs.h"
#include "session/session.h"

namespace bert {
namespace {

// Three sequences of S = 32 positions: real lengths 5, 17 and 9; sample 2's mask has a hole (its
// last real token at position 20), sample 0 has a masked position (7) beyond its real tokens.
constexpr int B = 3, S = 32, P = 2;
HostBatch test_batch() {
  HostBatch batch;
  batch.resize(B, S, P);
  const int real[B] = {5, 17, 8};
  for (int b = 0; b < B; ++b) {
    for (int s = 0; s < real[b]; ++s) {
      batch.input_ids[b * S + s] = 5 + s;
      batch.input_mask[b * S + s] = 1;
    }
  }
  batch.input_ids[2 * S + 20] = 42;
  batch.input_mask[2 * S + 20] = 1;
  batch.masked_lm_positions = {3, 7, 1, 16, 2, 0};
  batch.masked_lm_ids = {11, 12, 13, 14, 15, 0};
  batch.next_sentence_labels = {0, 1, 0};
  return batch;
}

ModelInputs build(Padding padding) {
  BertConfig config;
  config.vocab_size = 100;
  const HostBatch batch = test_batch();
  return build_model_inputs(view_of(batch), config, TaskConfig{}, B, S, P, padding, true);
}

TEST(ModelInputs, PaddedToAMultipleKeepsTheLongestUsedLengthRoundedUp) {
  // Used lengths: 8 (masked position 7), 17, 21 (the hole's token at 20): 21 rounds up to 24.
  const ModelInputs in = build(Padding{false, 8});
  EXPECT_EQ(in.layout.seq_start, (std::vector<int32_t>{0, 24, 48, 72}));
  EXPECT_EQ(in.layout.uniform_length(), 24);
  EXPECT_EQ(in.real_tokens, 5 + 17 + 9);
  EXPECT_EQ(in.cls_rows, (std::vector<int32_t>{0, 24, 48}));
  EXPECT_EQ(in.mlm_rows, (std::vector<int32_t>{3, 7, 24 + 1, 24 + 16, 48 + 2}));
  EXPECT_EQ(in.mlm_labels, (std::vector<int32_t>{11, 12, 13, 14, 15}));
  ASSERT_EQ(in.word_ids.size(), 72u);
  EXPECT_EQ(in.word_ids[48 + 20], 42);
  EXPECT_EQ(in.pos_ids[48 + 23], 23);
  EXPECT_EQ(in.key_bias[48 + 20], 0.0f);
  EXPECT_EQ(in.key_bias[48 + 19], -10000.0f);
  EXPECT_EQ(in.key_bias[5], -10000.0f);
  EXPECT_EQ(in.seq_length, 32);
}

TEST(ModelInputs, FixedMlmRowsGiveEverySequenceMaxPredictionsRowsTheExtraOnesUnlabelled) {
  Padding padding{false, 8};
  EXPECT_EQ(build(padding).mlm_labelled, 5);
  padding.fixed_mlm_rows = true;  // as recorded (CUDA graph) micro-batches are built
  const ModelInputs in = build(padding);
  EXPECT_EQ(in.mlm_rows, (std::vector<int32_t>{3, 7, 24 + 1, 24 + 16, 48 + 2, 48}));
  EXPECT_EQ(in.mlm_labels, (std::vector<int32_t>{11, 12, 13, 14, 15, -1}));
  EXPECT_EQ(in.mlm_labelled, 5);
}

// cuDNN's fused attention masks by key counts: sample 2's mask (a hole, then a real token at 20)
// would silently attend to the wrong keys, so it is refused, naming the sample and the setting.
TEST(ModelInputs, PrefixMasksOnlyRefusesAMaskWithAHole) {
  Padding padding;
  padding.prefix_masks = true;
  try {
    build(padding);
    FAIL() << "a mask with a hole was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("batch sample 2: its input_mask is not ones then zeros"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("train.fused_attention"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(build(Padding{}));  // the reference attention takes any mask
}

TEST(ModelInputs, AMultipleBeyondTheSequenceKeepsSeqLength) {
  EXPECT_EQ(build(Padding{false, 0}).layout.uniform_length(), 32);
  EXPECT_EQ(build(Padding{false, 48}).layout.uniform_length(), 32);
  EXPECT_EQ(build(Padding{false, 1}).layout.uniform_length(), 21);
}

TEST(ModelInputs, UnpaddedPacksOnlyPrefixSequencesWithoutMaskedPadding) {
  // Sample 0 has a masked position past its real tokens and sample 2 a hole: only sample 1 packs.
  EXPECT_EQ(build(Padding{true, 0}).layout.seq_start, (std::vector<int32_t>{0, 32, 49, 81}));
  EXPECT_EQ(build(Padding{true, 8}).layout.seq_start, (std::vector<int32_t>{0, 24, 41, 65}));
}

}  // namespace
}  // namespace bert
