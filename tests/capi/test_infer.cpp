// Fine-tuning and inference through the C ABI: bert_output_size and bert_infer for every head
// and output, inference-only sessions (no gradient or optimizer memory, training calls refused,
// the same outputs as a training session on the same weights), bad sizes and batches refused
// with a message and the buffer untouched, a sequence classifier that learns its labels, and
// bert_eval on task sessions: its error paths and the smaller bert_eval_result of before the task
// fields (the values themselves are checked against Hugging Face in tests/oracle/test_task_heads.py);
// the pooled output and logits (whose last layer runs on the [CLS] rows alone) against the head
// applied to the hidden output.
#include <bert.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "session_helpers.h"
#include "test_batch.h"

namespace {

std::string task_config(const std::string& task, int labels, const std::string& extra = "", int layers = 2) {
  return R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": )" + std::to_string(layers) +
         R"(, "num_attention_heads": 4,
                       "intermediate_size": 64, "max_position_embeddings": 64},
             "task": {"type": ")" + task + R"(", "num_labels": )" + std::to_string(labels) + R"(},
             "train": {"micro_batch": 4, "accumulation_steps": 4, "steps": 60, "lr": 0.003, "optimizer": "adamw", "threads": 1,
                       "warmup_proportion": 0.1)" + extra + R"(},
             "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}})";
}

TEST(Infer, OutputSizesFollowTheHead) {
  struct Case {
    const char* task;
    int labels;
    size_t logits;
  };
  const int B = 3, S = 20, H = 32;
  for (const Case& c : {Case{"sequence_classification", 3, 3u * 3}, Case{"token_classification", 5, 3u * 20 * 5},
                        Case{"question_answering", 2, 3u * 2 * 20}}) {
    bert_session* s = create(task_config(c.task, c.labels));
    size_t n = 0;
    ASSERT_EQ(bert_output_size(s, BERT_OUTPUT_LOGITS, B, S, &n), BERT_OK);
    EXPECT_EQ(n, c.logits) << c.task;
    ASSERT_EQ(bert_output_size(s, BERT_OUTPUT_HIDDEN, B, S, &n), BERT_OK);
    EXPECT_EQ(n, static_cast<size_t>(B * S * H));
    const bool pooler = std::string(c.task) == "sequence_classification";
    EXPECT_EQ(bert_output_size(s, BERT_OUTPUT_POOLED, B, S, &n), pooler ? BERT_OK : BERT_ERR_INVALID_ARGUMENT);
    if (!pooler) {
      EXPECT_NE(std::string(bert_last_error()).find("has no pooler"), std::string::npos);
    }
    EXPECT_EQ(bert_output_size(s, static_cast<bert_output>(7), B, S, &n), BERT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(bert_last_error()).find("bert_output = 7"), std::string::npos);
    // Longer than data.max_seq_length (bert_infer would refuse it), or more than fits: refused, never 0.
    n = 123;
    EXPECT_EQ(bert_output_size(s, BERT_OUTPUT_HIDDEN, 1 << 30, 1 << 29, &n), BERT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(bert_last_error()).find("seq_length 536870912 exceeds data.max_seq_length"), std::string::npos)
        << bert_last_error();
    EXPECT_EQ(n, 123u);
    ASSERT_EQ(bert_output_size(s, BERT_OUTPUT_HIDDEN, INT32_MAX, S, &n), BERT_OK);
    EXPECT_EQ(n, size_t{INT32_MAX} * S * H);
    bert_session_destroy(s);
  }
}

TEST(Infer, InferenceSessionHoldsNoTrainingStateAndMatchesTraining) {
  const std::string path = ::testing::TempDir() + "/infer_cls.h5";
  TestBatch tb(6, 32, 0, 100, 7);  // 6 sequences: two micro-batches of 4 and 2
  const bert_batch b = tb.view();
  // Six layers: an inference session keeps the activations of two.
  bert_session* train = create(task_config("sequence_classification", 3, "", 6));
  ASSERT_EQ(bert_checkpoint(train, path.c_str()), BERT_OK) << bert_last_error();
  const std::vector<float> logits = infer(train, b, BERT_OUTPUT_LOGITS);
  const std::vector<float> hidden = infer(train, b, BERT_OUTPUT_HIDDEN);

  bert_session* inf = create(task_config("sequence_classification", 3, R"(, "init_checkpoint": ")" + path + "\"", 6)
                                 .insert(1, R"("mode": "inference", )"));
  ASSERT_NE(inf, nullptr);
  EXPECT_EQ(infer(inf, b, BERT_OUTPUT_LOGITS), logits);
  EXPECT_EQ(infer(inf, b, BERT_OUTPUT_HIDDEN), hidden);
  for (int i = 0; i < 6; ++i) {  // padding positions are 0, real ones are not
    for (int t = 0; t < 32; ++t) {
      const float v = hidden[(i * 32 + t) * 32];
      EXPECT_EQ(v == 0.0f, tb.mask[i * 32 + t] == 0) << i << " " << t;
    }
  }

  bert_memory_info m_train, m_inf;
  bert_memory_info_init(&m_train);
  bert_memory_info_init(&m_inf);
  ASSERT_EQ(bert_session_memory(train, &m_train), BERT_OK);
  ASSERT_EQ(bert_session_memory(inf, &m_inf), BERT_OK);
  EXPECT_EQ(m_inf.gradient_bytes, 0u);
  EXPECT_EQ(m_inf.optimizer_bytes, 0u);
  EXPECT_GT(m_train.gradient_bytes, 0u);
  EXPECT_LT(m_inf.activation_bytes * 2, m_train.activation_bytes);
  EXPECT_LT(m_inf.peak_device_bytes * 2, m_train.peak_device_bytes);

  bert_step_result r;
  bert_step_result_init(&r);
  EXPECT_EQ(bert_step(inf, &b, &r), BERT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(bert_last_error()).find("\"mode\": \"inference\""), std::string::npos);
  EXPECT_EQ(bert_forward_backward(inf, &b, &r), BERT_ERR_UNSUPPORTED);
  EXPECT_EQ(bert_checkpoint(inf, path.c_str()), BERT_ERR_UNSUPPORTED);
  float g[3 * 32];
  EXPECT_EQ(bert_grad_read(inf, "classifier.weight", g, 3 * 32), BERT_ERR_UNSUPPORTED);
  bert_session_destroy(inf);
  bert_session_destroy(train);
  std::remove(path.c_str());
}

// The pooled output and the logits on it need only the last layer's [CLS] rows, and the model
// runs that layer's dense part on those alone; the hidden output runs every row. The pooler and
// classifier applied here (in double) to the hidden output's [CLS] rows give the same numbers,
// for a padded and an unpadded batch of mixed lengths.
TEST(Infer, PooledAndLogitsEqualTheHeadOnTheHiddenClsRows) {
  const int H = 32, NL = 3;
  TestBatch tb(6, 32, 0, 100, 11);
  const bert_batch b = tb.view();
  for (const bool unpad : {false, true}) {
    std::string config = task_config("sequence_classification", NL, "", 3);
    if (unpad) config.replace(config.find(R"("data": {)"), 9, R"("data": {"unpad": true, )");
    bert_session* s = create(config);
    ASSERT_NE(s, nullptr) << bert_last_error();
    std::vector<float> pool_w(H * H), pool_b(H), cls_w(NL * H), cls_b(NL, 0.25f);
    ASSERT_EQ(bert_param_read(s, "bert.pooler.dense.weight", pool_w.data(), pool_w.size()), BERT_OK);
    for (int j = 0; j < H; ++j) pool_b[j] = 0.01f * (j - H / 2);  // non-zero biases
    ASSERT_EQ(bert_param_write(s, "bert.pooler.dense.bias", pool_b.data(), pool_b.size()), BERT_OK);
    ASSERT_EQ(bert_param_read(s, "classifier.weight", cls_w.data(), cls_w.size()), BERT_OK);
    ASSERT_EQ(bert_param_write(s, "classifier.bias", cls_b.data(), cls_b.size()), BERT_OK);
    const std::vector<float> hidden = infer(s, b, BERT_OUTPUT_HIDDEN), pooled = infer(s, b, BERT_OUTPUT_POOLED),
                             logits = infer(s, b, BERT_OUTPUT_LOGITS);
    for (int i = 0; i < tb.B; ++i) {
      const float* cls = hidden.data() + size_t(i) * tb.S * H;
      std::vector<double> ref(H);
      for (int j = 0; j < H; ++j) {
        double sum = pool_b[j];
        for (int k = 0; k < H; ++k) sum += double(pool_w[j * H + k]) * cls[k];
        ref[j] = std::tanh(sum);
        EXPECT_NEAR(pooled[i * H + j], ref[j], 1e-5) << "unpad " << unpad << " sequence " << i << " unit " << j;
      }
      for (int c = 0; c < NL; ++c) {
        double sum = cls_b[c];
        for (int k = 0; k < H; ++k) sum += double(cls_w[c * H + k]) * ref[k];
        EXPECT_NEAR(logits[i * NL + c], sum, 1e-5) << "unpad " << unpad << " sequence " << i << " label " << c;
      }
    }
    bert_session_destroy(s);
  }
}

TEST(Infer, BadSizesAndBatchesAreRefusedWithTheBufferUntouched) {
  bert_session* s = create(task_config("token_classification", 4));
  TestBatch tb(5, 16, 0, 100, 3);
  bert_batch b = tb.view();
  std::vector<float> out(5 * 16 * 4 - 1, 7.0f);
  EXPECT_EQ(bert_infer(s, &b, BERT_OUTPUT_LOGITS, out.data(), out.size()), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("output buffer holds 319 floats but 5 sequences of length 16 need 320"),
            std::string::npos)
      << bert_last_error();
  out.resize(320, 7.0f);
  EXPECT_EQ(bert_infer(s, &b, BERT_OUTPUT_LOGITS, nullptr, out.size()), BERT_ERR_INVALID_ARGUMENT);
  tb.ids[4 * 16 + 2] = 100;  // sample 4 (second micro-batch): a token id outside the vocabulary
  EXPECT_EQ(bert_infer(s, &b, BERT_OUTPUT_LOGITS, out.data(), out.size()), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("'input_ids' sample 0 index 2: value 100"), std::string::npos)
      << bert_last_error();
  for (float v : out) ASSERT_EQ(v, 7.0f);
  tb.ids[4 * 16 + 2] = 5;
  b.seq_length = 40;
  EXPECT_EQ(bert_infer(s, &b, BERT_OUTPUT_LOGITS, out.data(), out.size()), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bert_infer(s, nullptr, BERT_OUTPUT_LOGITS, out.data(), out.size()), BERT_ERR_INVALID_ARGUMENT);
  b.seq_length = 16;
  bert_step_result r;
  bert_step_result_init(&r);
  EXPECT_EQ(bert_step(s, &b, &r), BERT_ERR_INVALID_ARGUMENT);  // training needs labels
  EXPECT_NE(std::string(bert_last_error()).find("batch field 'labels' is NULL"), std::string::npos);
  EXPECT_EQ(bert_step(s, nullptr, &r), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("trains on batches from the host"), std::string::npos);
  std::vector<int32_t> labels(5 * 16, -100);
  labels[3] = 4;
  b.labels = labels.data();
  EXPECT_EQ(bert_step(s, &b, &r), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("'labels' sample 0 index 3: value 4 is outside [0, 4)"),
            std::string::npos)
      << bert_last_error();
  bert_session_destroy(s);

  bert_session* bad = nullptr;
  EXPECT_EQ(bert_session_create(R"({"task": {"type": "ranking"}})", nullptr, &bad), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("task.type"), std::string::npos) << bert_last_error();
  EXPECT_EQ(bert_session_create(R"({"task": {"type": "sequence_classification", "num_labels": 0}})", nullptr, &bad),
            BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("task.num_labels"), std::string::npos) << bert_last_error();
  EXPECT_EQ(bert_session_create(R"({"mode": "serve"})", nullptr, &bad), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("'mode'"), std::string::npos) << bert_last_error();
}

// Label = whether token 7 occurs in the sequence: a classifier must learn it from the batch.
TEST(Infer, SequenceClassifierLearnsItsLabels) {
  bert_session* s = create(task_config("sequence_classification", 2));
  const int B = 16, S = 16;
  TestBatch tb(B, S, 0, 100, 11);
  std::vector<int32_t> labels(B);
  for (int i = 0; i < B; ++i) {
    labels[i] = i % 2;
    for (int t = 1; t < S; ++t) {
      if (tb.mask[i * S + t] && tb.ids[i * S + t] == 7) tb.ids[i * S + t] = 8;
    }
    if (labels[i]) tb.ids[i * S + 3] = 7;
  }
  bert_batch b = tb.view();
  b.labels = labels.data();
  bert_step_result r;
  bert_step_result_init(&r);
  float first = 0;
  for (int step = 0; step < 60; ++step) {
    ASSERT_EQ(bert_step(s, &b, &r), BERT_OK) << bert_last_error();
    if (step == 0) first = r.loss;
  }
  EXPECT_NEAR(first, std::log(2.0f), 0.1);
  EXPECT_LT(r.loss, 0.05f);
  const std::vector<float> logits = infer(s, b, BERT_OUTPUT_LOGITS);
  for (int i = 0; i < B; ++i) EXPECT_EQ(logits[2 * i + 1] > logits[2 * i], labels[i] == 1) << i;
  bert_eval_result e;
  bert_eval_result_init(&e);
  ASSERT_EQ(bert_eval(s, &b, &e), BERT_OK) << bert_last_error();
  EXPECT_EQ(e.task_accuracy, 1.0);
  EXPECT_LT(e.task_loss, 0.05);
  EXPECT_EQ(e.task_count, B);
  bert_session_destroy(s);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Infer, EvalOfTaskSessionsNeedsALabelledBatchAndTheTaskFields) {
  const std::string path = ::testing::TempDir() + "/eval_qa.h5";
  const int B = 6, S = 16;
  TestBatch tb(B, S, 0, 100, 5);
  bert_batch b = tb.view();
  bert_session* s = create(task_config("question_answering", 2));
  bert_eval_result r;
  bert_eval_result_init(&r);
  EXPECT_EQ(bert_eval(s, nullptr, &r), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(bert_last_error(), "bert_eval on a question_answering session needs a labelled batch"))
      << bert_last_error();
  EXPECT_EQ(bert_eval(s, &b, &r), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(bert_last_error(), "'start_positions' and 'end_positions' must not be NULL")) << bert_last_error();
  EXPECT_EQ(bert_eval(s, &b, nullptr), BERT_ERR_INVALID_ARGUMENT);

  const std::vector<int32_t> starts = {1, 2, 3, 4, 5, 40}, ends = {2, 2, 5, 9, 6, 7};  // 40: clamped to S, left out
  b.start_positions = starts.data();
  b.end_positions = ends.data();
  r.struct_size = offsetof(bert_eval_result, task_loss);  // a host built before the task fields
  EXPECT_EQ(bert_eval(s, &b, &r), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(bert_last_error(), "ends before task_loss, which a question_answering session fills"))
      << bert_last_error();

  bert_eval_result_init(&r);
  ASSERT_EQ(bert_eval(s, &b, &r), BERT_OK) << bert_last_error();  // 6 sequences: micro-batches of 4 and 2
  EXPECT_TRUE(std::isfinite(r.task_loss) && r.task_loss > 0) << r.task_loss;
  EXPECT_TRUE(r.task_accuracy >= 0 && r.task_accuracy <= 1) << r.task_accuracy;
  EXPECT_EQ(r.task_count, B);
  EXPECT_EQ(r.sequences, B);
  EXPECT_EQ(r.mlm_loss, 0.0);
  EXPECT_EQ(r.masked_tokens, 0);

  // An inference session on the same weights evaluates the same.
  ASSERT_EQ(bert_checkpoint(s, path.c_str()), BERT_OK) << bert_last_error();
  bert_session* inf = create(task_config("question_answering", 2, R"(, "init_checkpoint": ")" + path + "\"")
                                 .insert(1, R"("mode": "inference", )"));
  bert_eval_result ri;
  bert_eval_result_init(&ri);
  ASSERT_EQ(bert_eval(inf, &b, &ri), BERT_OK) << bert_last_error();
  EXPECT_EQ(ri.task_loss, r.task_loss);
  EXPECT_EQ(ri.task_accuracy, r.task_accuracy);
  bert_session_destroy(inf);
  bert_session_destroy(s);
  std::remove(path.c_str());

  bert_session* token = create(task_config("token_classification", 3));
  std::vector<int32_t> none(B * S, -100);  // no labelled token: NaN, as Hugging Face's mean over none
  b = tb.view();
  b.labels = none.data();
  bert_eval_result_init(&r);
  ASSERT_EQ(bert_eval(token, &b, &r), BERT_OK) << bert_last_error();
  EXPECT_TRUE(std::isnan(r.task_loss) && std::isnan(r.task_accuracy));
  EXPECT_EQ(r.task_count, 0);
  bert_session_destroy(token);
}

TEST(Infer, PretrainingEvalStillTakesTheSmallerResultAndLeavesTheTaskFieldsZero) {
  bert_session* s = create(R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 1,
                                         "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
                               "train": {"micro_batch": 4, "threads": 1},
                               "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}})");
  TestBatch tb(4, 32, 5, 100, 9);
  const bert_batch b = tb.view();
  bert_eval_result r;
  bert_eval_result_init(&r);
  r.task_loss = r.task_accuracy = 7;
  ASSERT_EQ(bert_eval(s, &b, &r), BERT_OK) << bert_last_error();
  EXPECT_EQ(r.task_loss, 0.0);
  EXPECT_EQ(r.task_accuracy, 0.0);
  EXPECT_EQ(r.task_count, 0);
  EXPECT_GT(r.masked_tokens, 0);

  bert_eval_result old;  // a host built before the task fields: they are not written
  std::memset(&old, 0x5A, sizeof(old));
  old.struct_size = offsetof(bert_eval_result, task_loss);
  ASSERT_EQ(bert_eval(s, &b, &old), BERT_OK) << bert_last_error();
  EXPECT_EQ(old.mlm_loss, r.mlm_loss);
  EXPECT_EQ(old.masked_tokens, r.masked_tokens);
  const auto* tail = reinterpret_cast<const unsigned char*>(&old) + offsetof(bert_eval_result, task_loss);
  for (size_t i = 0; i < sizeof(old) - offsetof(bert_eval_result, task_loss); ++i) ASSERT_EQ(tail[i], 0x5A) << i;
  old.struct_size = offsetof(bert_eval_result, masked_tokens);
  EXPECT_EQ(bert_eval(s, &b, &old), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(bert_last_error(), "bert_eval_result.struct_size")) << bert_last_error();
  bert_session_destroy(s);
}

}  // namespace
