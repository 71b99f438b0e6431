// Loss scaling through the C ABI on the CPU backend (the same session code drives fp16 on a
// GPU): an injected overflow (a loss scale so large the gradients overflow fp32) skips the
// step without touching the weights and halves the scale; clean steps double it after the
// window, capped at the maximum; a static power-of-two scale trains exactly like no scaling;
// the scale survives a checkpoint round trip; bad values are rejected by key.
#include <bert.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "session_helpers.h"

namespace {

std::string config(const std::string& train_extra, int micro_batch = 4, int predictions = 5) {
  return R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
      "intermediate_size": 64, "max_position_embeddings": 64},
      "train": {"micro_batch": )" + std::to_string(micro_batch) + R"(, "steps": 40, "lr": 0.02, "threads": 1,
      "dropout": false)" + train_extra + R"(}, "data": {"max_seq_length": 32, "max_predictions_per_seq": )" +
         std::to_string(predictions) + "}}";
}

std::vector<float> weights(bert_session* s, const char* name = "bert.encoder.layer.0.attention.self.query.weight") {
  std::vector<float> w(32 * 32);
  EXPECT_EQ(bert_param_read(s, name, w.data(), w.size()), BERT_OK) << bert_last_error();
  return w;
}

// One sequence with one masked token: the decoder-row gradient is about -(LayerNorm output),
// whose largest element exceeds 1, so at a scale of 3e38 it overflows fp32.
TEST(LossScaling, OverflowSkipsTheStepAndHalvesTheScale) {
  bert_session* s = create(config(R"(, "loss_scaling": "dynamic", "loss_scale": 3e38)", 1, 1));
  ASSERT_NE(s, nullptr);
  const std::vector<float> before = weights(s);
  bert_step_result r = step(s);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_FLOAT_EQ(r.loss_scale, 3e38f);
  EXPECT_EQ(r.step, 1);
  EXPECT_TRUE(std::isfinite(r.loss)) << "the loss itself is not scaled";
  EXPECT_EQ(weights(s), before) << "a skipped step must not change the weights";

  float expected = 1.5e38f;
  int skipped = 1;
  for (int i = 0; i < 200 && r.skipped; ++i) {
    r = step(s);
    EXPECT_FLOAT_EQ(r.loss_scale, expected) << "the scale halves after every overflow";
    if (r.skipped) {
      ++skipped;
      expected /= 2;
    }
  }
  EXPECT_EQ(r.skipped, 0) << "the scale never came down far enough to train";
  EXPECT_NE(weights(s), before) << "a clean step must update the weights";
  std::printf("[ info ] %d steps skipped before the scale reached %g\n", skipped, r.loss_scale);
  bert_session_destroy(s);
}

TEST(LossScaling, CleanStepsDoubleTheScaleUpToTheMaximum) {
  bert_session* s =
      create(config(R"(, "loss_scaling": "dynamic", "loss_scale": 1024, "loss_scale_window": 3, "max_loss_scale": 4096)"));
  ASSERT_NE(s, nullptr);
  const float want[] = {1024, 1024, 1024, 2048, 2048, 2048, 4096, 4096, 4096, 4096};
  for (float w : want) {
    const bert_step_result r = step(s);
    EXPECT_EQ(r.skipped, 0);
    EXPECT_EQ(r.loss_scale, w) << "at step " << r.step;
  }
  bert_session_destroy(s);
}

TEST(LossScaling, StaticPowerOfTwoScaleTrainsExactlyLikeNoScaling) {
  bert_session* plain = create(config(""));
  bert_session* scaled = create(config(R"(, "loss_scaling": "static", "loss_scale": 65536)"));
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(scaled, nullptr);
  for (int i = 0; i < 5; ++i) {
    const bert_step_result a = step(plain), b = step(scaled);
    EXPECT_EQ(a.loss_scale, 1.0f);
    EXPECT_EQ(b.loss_scale, 65536.0f);
    EXPECT_EQ(a.loss, b.loss) << "step " << i + 1;
    EXPECT_FLOAT_EQ(a.grad_norm, b.grad_norm) << "the reported norm is of the unscaled gradient";
  }
  const std::vector<float> wa = weights(plain), wb = weights(scaled);
  double worst = 0;
  for (size_t i = 0; i < wa.size(); ++i) worst = std::max(worst, std::fabs(double(wa[i]) - wb[i]));
  EXPECT_LT(worst, 1e-7);
  bert_session_destroy(plain);
  bert_session_destroy(scaled);
}

TEST(LossScaling, ScaleAndWindowSurviveACheckpoint) {
  const std::string cfg = config(R"(, "loss_scaling": "dynamic", "loss_scale": 1024, "loss_scale_window": 3)");
  const std::string path = (std::filesystem::temp_directory_path() / "bert_loss_scale_ckpt.h5").string();
  bert_session* a = create(cfg);
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 4; ++i) step(a);  // scale 2048, one clean step into the next window
  ASSERT_EQ(bert_checkpoint(a, path.c_str()), BERT_OK) << bert_last_error();
  bert_session* b = create(cfg);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(bert_checkpoint_load(b, path.c_str()), BERT_OK) << bert_last_error();
  for (int i = 0; i < 3; ++i) {
    const bert_step_result ra = step(a), rb = step(b);
    EXPECT_EQ(ra.loss_scale, rb.loss_scale) << "step " << ra.step;
    EXPECT_EQ(ra.loss, rb.loss) << "step " << ra.step;
  }
  EXPECT_EQ(step(b).loss_scale, 4096.0f);
  bert_session_destroy(a);
  bert_session_destroy(b);
  std::filesystem::remove(path);
}

TEST(LossScaling, BadValuesNameTheKey) {
  const char* bad[][2] = {
      {R"(, "loss_scaling": "auto")", "train.loss_scaling"},
      {R"(, "loss_scale": 0)", "train.loss_scale"},
      {R"(, "loss_scale_window": 0)", "train.loss_scale_window"},
      {R"(, "loss_scale": 8, "min_loss_scale": 16)", "train.loss_scale"},
      {R"(, "precision": "fp16")", "train.precision"},
  };
  for (const auto& [extra, key] : bad) {
    bert_session* s = nullptr;
    EXPECT_EQ(bert_session_create(config(extra).c_str(), nullptr, &s), BERT_ERR_CONFIG) << extra;
    EXPECT_EQ(s, nullptr);
    EXPECT_NE(std::string(bert_last_error()).find(key), std::string::npos) << bert_last_error();
  }
}

}  // namespace
