// Bad input through the C ABI: every case returns a non-zero status with a message naming the
// key, field or tensor at fault, leaves the session usable, and never aborts the process.
#include <bert.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "test_batch.h"

namespace {

std::string create_error(const std::string& config, bert_status expected = BERT_ERR_CONFIG) {
  bert_session* s = reinterpret_cast<bert_session*>(0x1);  // must stay untouched on failure
  bert_status st = bert_session_create(config.c_str(), nullptr, &s);
  EXPECT_EQ(st, expected) << config;
  EXPECT_EQ(s, reinterpret_cast<bert_session*>(0x1)) << "out-parameter written on failure";
  return bert_last_error();
}

class Session : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(bert_session_create(kTinyConfig, nullptr, &s), BERT_OK) << bert_last_error(); }
  void TearDown() override {
    // The session must still train after whatever the test did.
    TestBatch good(2, 16, 3, 100);
    bert_batch b = good.view();
    EXPECT_EQ(bert_forward_backward(s, &b, nullptr), BERT_OK) << bert_last_error();
    bert_session_destroy(s);
  }
  std::string fb_error(const TestBatch& t, bert_status expected = BERT_ERR_INVALID_ARGUMENT) {
    bert_batch b = t.view();
    EXPECT_EQ(bert_forward_backward(s, &b, nullptr), expected);
    return bert_last_error();
  }
  bert_session* s = nullptr;
};

TEST(Config, MalformedJson) {
  EXPECT_NE(create_error("{\"model\": ").find("not valid JSON"), std::string::npos);
}

TEST(Config, NumberOutOfRangeIsAConfigError) {
  const std::string m = create_error(R"({"train": {"lr": 1e999}})");
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("overflow"), std::string::npos) << m;
}

// A value nested 50,000 deep crashed every host (the error message formatted it recursively):
// nesting is bounded at parse time, wherever the deep value sits.
TEST(Config, DeepNestingIsRefusedAtParseTime) {
  const std::string deep = std::string(50000, '[') + std::string(50000, ']');
  for (const std::string& config : {"{\"train\": {\"lr\": " + deep + "}}", "{\"unknown\": " + deep + "}", deep}) {
    const std::string m = create_error(config);
    EXPECT_NE(m.find("config nests deeper than 64 levels"), std::string::npos) << m.substr(0, 200);
  }
  // 64 levels are accepted (and then refused for what the value is, briefly).
  const std::string ok = "{\"train\": {\"lr\": " + std::string(62, '[') + std::string(62, ']') + "}}";
  const std::string m = create_error(ok);
  EXPECT_NE(m.find("'train.lr' must be a number, got [[[["), std::string::npos) << m;
  EXPECT_LT(m.size(), 200u) << m;
}

// A 10 MB value is quoted by its first 60 characters and its size, not echoed whole.
TEST(Config, LongValuesAreQuotedBriefly) {
  const std::string big(10 << 20, 'x');
  for (const std::string& config : {"{\"train\": {\"optimizer\": \"" + big + "\"}}",
                                    "{\"train\": {\"lr\": \"" + big + "\"}}"}) {
    const std::string m = create_error(config);
    EXPECT_LT(m.size(), 300u) << m.substr(0, 300);
    EXPECT_NE(m.find("\"" + std::string(60, 'x') + "\"... (10485760 bytes)"), std::string::npos) << m.substr(0, 300);
  }
}

// A directory or a special file given as `model` is a config error naming the key and the path.
TEST(Config, ModelThatIsNotAFileIsNamed) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  for (const auto& [path, what] : {std::pair<std::string, std::string>{dir, "is a directory"},
                                   {"/dev/null/x.json", "no such file"},
                                   {"/dev/zero", "is not a regular file"}}) {
    const std::string m = create_error("{\"model\": \"" + path + "\"}");
    EXPECT_NE(m.find("config key 'model'"), std::string::npos) << m;
    EXPECT_NE(m.find("'" + path + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }
}

// An evaluation directory is evaluated whatever the training data is, so a missing one is refused
// at creation (a session used to evaluate 32 synthetic sequences instead).
TEST(Config, MissingEvalDirIsNamed) {
  const std::string m = create_error(R"({"model": "bert-tiny", "data": {"eval_dir": "/nonexistent/eval"}})");
  EXPECT_NE(m.find("config key 'data.eval_dir': directory '/nonexistent/eval' does not exist"), std::string::npos) << m;
}

TEST(Config, UnknownKeyIsNamed) {
  EXPECT_NE(create_error(R"({"train": {"learning_rate": 0.1}})").find("'train.learning_rate'"), std::string::npos);
  EXPECT_NE(create_error(R"({"modle": "bert-tiny"})").find("'modle'"), std::string::npos);
}

TEST(Config, WrongTypeIsNamed) {
  std::string m = create_error(R"({"train": {"micro_batch": "eight"}})");
  EXPECT_NE(m.find("'train.micro_batch'"), std::string::npos) << m;
  EXPECT_NE(m.find("integer"), std::string::npos) << m;
  m = create_error(R"({"model": {"preset": "bert-tiny", "hidden_act": 3}})");
  EXPECT_NE(m.find("'model.hidden_act'"), std::string::npos) << m;
}

TEST(Config, ZeroOrNegativeSizes) {
  EXPECT_NE(create_error(R"({"train": {"micro_batch": 0}})").find("'train.micro_batch'"), std::string::npos);
  EXPECT_NE(create_error(R"({"train": {"steps": -5}})").find("'train.steps'"), std::string::npos);
  EXPECT_NE(create_error(R"({"model": {"hidden_size": -1}})").find("'model.hidden_size'"), std::string::npos);
  EXPECT_NE(create_error(R"({"data": {"max_seq_length": 0}})").find("'data.max_seq_length'"), std::string::npos);
}

TEST(Config, ImpossibleValues) {
  std::string m = create_error(R"({"model": {"preset": "bert-tiny", "hidden_size": 130, "num_attention_heads": 4}})");
  EXPECT_NE(m.find("not divisible"), std::string::npos) << m;
  m = create_error(R"({"model": {"preset": "bert-tiny", "max_position_embeddings": 64}, "data": {"max_seq_length": 128}})");
  EXPECT_NE(m.find("'data.max_seq_length'"), std::string::npos) << m;
  m = create_error(R"({"model": "bert-huge"})");
  EXPECT_NE(m.find("bert-huge"), std::string::npos) << m;
  m = create_error(R"({"train": {"optimizer": "adagrad"}})");
  EXPECT_NE(m.find("'train.optimizer'"), std::string::npos) << m;
  m = create_error(R"({"model": "bert-tiny", "train": {"fused_attention": true}})");
  EXPECT_NE(m.find("'train.fused_attention' = true needs device \"cuda\""), std::string::npos) << m;
  m = create_error(R"({"model": "bert-tiny", "train": {"precision": "tf32"}})");  // ran as fp32 before: refused now
  EXPECT_NE(m.find("'train.precision' = \"tf32\" needs device \"cuda\""), std::string::npos) << m;
  m = create_error(R"({"model": "bert-tiny", "data": {"pad_to_multiple": -8}})");
  EXPECT_NE(m.find("'data.pad_to_multiple'"), std::string::npos) << m;
}

// A recorded micro-batch (CUDA graph) needs the GPU and the pretraining heads: each missing one is
// named. (Unpadded batches are padded to their length bin.)
TEST(Config, CudaGraphsNameWhatTheyNeed) {
  std::string m = create_error(R"({"model": "bert-tiny", "train": {"cuda_graphs": true}, "data": {"unpad": false}})");
  EXPECT_NE(m.find("'train.cuda_graphs' = true needs device \"cuda\""), std::string::npos) << m;
  m = create_error(R"({"model": "bert-tiny", "device": "cuda", "train": {"cuda_graphs": true},
                       "task": {"type": "sequence_classification", "num_labels": 2}, "data": {"unpad": false}})");
  EXPECT_NE(m.find("records pretraining micro-batches; the \"sequence_classification\" head"), std::string::npos) << m;
}

TEST(Config, DeviceStringsAreParsedStrictly) {
  for (const char* device : {"cuda:x", "cuda:1x", "cuda:-1", "cuda:", "cuda: 1", "cuda:99999", "gpu", "CPU"}) {
    const std::string m = create_error(std::string(R"({"model": "bert-tiny", "device": ")") + device + "\"}");
    EXPECT_NE(m.find(std::string("config key 'device' = \"") + device + "\" is not one of: cpu, cuda, cuda:N"),
              std::string::npos) << m;
  }
}

TEST(Config, RunKeysThatCannotHoldTogether) {
  std::string m = create_error(R"({"model": "bert-tiny", "train": {"micro_batch": 4, "global_batch": 10}})");
  EXPECT_NE(m.find("'train.global_batch' = 10 is not a multiple of train.micro_batch (4) x world size (1) = 4"),
            std::string::npos) << m;
  m = create_error(R"({"model": "bert-tiny", "train": {"micro_batch": 4, "global_batch": 16, "accumulation_steps": 2}})");
  EXPECT_NE(m.find("'train.accumulation_steps' = 2 contradicts train.global_batch = 16, which needs 4"), std::string::npos)
      << m;
  m = create_error(R"({"model": "bert-tiny", "train": {"eval_every": 5, "eval_every_samples": 100}})");
  EXPECT_NE(m.find("'train.eval_every' and 'train.eval_every_samples' exclude each other"), std::string::npos) << m;
  m = create_error(R"({"model": "bert-tiny", "train": {"target_mlm_accuracy": 1.5}})");
  EXPECT_NE(m.find("'train.target_mlm_accuracy'"), std::string::npos) << m;
  m = create_error(R"({"model": "bert-tiny", "data": {"length_bins": true}})");
  EXPECT_NE(m.find("'data.length_bins' needs HDF5 shards"), std::string::npos) << m;
  m = create_error(R"({"model": "bert-tiny", "log": {"submission_division": "closedish"}})");
  EXPECT_NE(m.find("'log.submission_division'"), std::string::npos) << m;
  // Consistent: global_batch = micro_batch x accumulation_steps on one rank.
  bert_session* s = nullptr;
  ASSERT_EQ(bert_session_create(R"({"model": "bert-tiny", "train": {"micro_batch": 4, "global_batch": 16,
      "accumulation_steps": 4}, "data": {"max_seq_length": 32}})", nullptr, &s), BERT_OK) << bert_last_error();
  bert_session_destroy(s);
}

TEST(Config, NullArguments) {
  bert_session* s = nullptr;
  EXPECT_EQ(bert_session_create(nullptr, nullptr, &s), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("config_json"), std::string::npos);
  EXPECT_EQ(bert_session_create("{}", nullptr, nullptr), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bert_step(nullptr, nullptr, nullptr), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("session"), std::string::npos);
  bert_session_destroy(nullptr);
}

TEST_F(Session, UnknownReduceOpIsRefused) {
  float value = 1.0f;
  int raw = 99;  // what a host passing a bad integer hands over
  bert_reduce_op op;
  std::memcpy(&op, &raw, sizeof op);
  EXPECT_EQ(bert_allreduce_host(s, &value, 1, op), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("unknown reduce op 99"), std::string::npos) << bert_last_error();
}

TEST_F(Session, TokenIdOutOfRange) {
  TestBatch t(2, 16, 3, 100);
  t.ids[5] = 100;
  std::string m = fb_error(t);
  EXPECT_NE(m.find("input_ids"), std::string::npos) << m;
  EXPECT_NE(m.find("100"), std::string::npos) << m;
  t.ids[5] = -1;
  EXPECT_NE(fb_error(t).find("input_ids"), std::string::npos);
}

TEST_F(Session, SegmentIdNotBinary) {
  TestBatch t(2, 16, 3, 100);
  t.seg[3] = 2;
  EXPECT_NE(fb_error(t).find("segment_ids"), std::string::npos);
}

TEST_F(Session, MaskedPositionBeyondSequence) {
  TestBatch t(2, 16, 3, 100);
  t.pos[1] = 16;
  std::string m = fb_error(t);
  EXPECT_NE(m.find("masked_lm_positions"), std::string::npos) << m;
}

TEST_F(Session, MaskedLabelOutOfRange) {
  TestBatch t(2, 16, 3, 100);
  t.labels[0] = 1000;
  EXPECT_NE(fb_error(t).find("masked_lm_ids"), std::string::npos);
}

TEST_F(Session, BatchLargerThanMicroBatch) {
  TestBatch t(5, 16, 3, 100);
  std::string m = fb_error(t);
  EXPECT_NE(m.find("train.micro_batch"), std::string::npos) << m;
  bert_batch b = t.view();
  b.batch_size = 9;  // more than micro_batch * accumulation_steps
  EXPECT_EQ(bert_step(s, &b, nullptr), BERT_ERR_INVALID_ARGUMENT);
}

TEST_F(Session, SequenceLongerThanConfigured) {
  TestBatch t(2, 40, 3, 100);
  EXPECT_NE(fb_error(t).find("data.max_seq_length"), std::string::npos);
}

TEST_F(Session, ZeroBatch) {
  TestBatch t(2, 16, 3, 100);
  bert_batch b = t.view();
  b.batch_size = 0;
  EXPECT_EQ(bert_forward_backward(s, &b, nullptr), BERT_ERR_INVALID_ARGUMENT);
  b.batch_size = -3;
  EXPECT_EQ(bert_forward_backward(s, &b, nullptr), BERT_ERR_INVALID_ARGUMENT);
}

TEST_F(Session, NullFields) {
  TestBatch t(2, 16, 3, 100);
  bert_batch b = t.view();
  b.input_ids = nullptr;
  EXPECT_EQ(bert_forward_backward(s, &b, nullptr), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("input_ids"), std::string::npos);
  EXPECT_EQ(bert_forward_backward(s, nullptr, nullptr), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bert_checkpoint(s, nullptr), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bert_param_read(s, "cls.predictions.bias", nullptr, 100), BERT_ERR_INVALID_ARGUMENT);
}

TEST_F(Session, StructSizeTooSmall) {
  TestBatch t(2, 16, 3, 100);
  bert_batch b = t.view();
  b.struct_size = 8;
  EXPECT_EQ(bert_forward_backward(s, &b, nullptr), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("bert_batch_init"), std::string::npos);
}

TEST_F(Session, OptimizerStepWithoutGradient) {
  EXPECT_EQ(bert_optimizer_step(s, nullptr), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("bert_forward_backward"), std::string::npos);
}

TEST_F(Session, UnknownParameterAndWrongCount) {
  std::vector<float> buf(100);
  EXPECT_EQ(bert_param_read(s, "bert.nope", buf.data(), 100), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("bert.nope"), std::string::npos);
  EXPECT_EQ(bert_param_read(s, "cls.predictions.bias", buf.data(), 99), BERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bert_last_error()).find("99"), std::string::npos);
  size_t count = 0;
  ASSERT_EQ(bert_param_count(s, &count), BERT_OK);
  EXPECT_EQ(bert_param_info(s, count, nullptr, nullptr, nullptr), BERT_ERR_INVALID_ARGUMENT);
}

TEST_F(Session, MissingCheckpoint) {
  EXPECT_EQ(bert_checkpoint_load(s, "/nonexistent/dir/ckpt.h5"), BERT_ERR_IO);
  EXPECT_NE(std::string(bert_last_error()).find("/nonexistent/dir/ckpt.h5"), std::string::npos);
}

TEST_F(Session, UnwritableCheckpointPath) {
  EXPECT_EQ(bert_checkpoint(s, "/nonexistent/dir/ckpt.h5"), BERT_ERR_IO);
  EXPECT_NE(std::string(bert_last_error()).find("/nonexistent/dir"), std::string::npos);
  if (geteuid() != 0) {  // root writes anywhere; the directory test above still holds
    EXPECT_EQ(bert_checkpoint(s, "/proc/ckpt.h5"), BERT_ERR_IO);
  }
}

TEST_F(Session, NotACheckpoint) {
  const std::string path = std::filesystem::temp_directory_path() / "bert_not_a_checkpoint.h5";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("this is not HDF5", f);
  std::fclose(f);
  std::vector<float> before(100), after(100);
  bert_param_read(s, "cls.predictions.bias", before.data(), 100);
  EXPECT_EQ(bert_checkpoint_load(s, path.c_str()), BERT_ERR_CHECKPOINT);
  EXPECT_NE(std::string(bert_last_error()).find(path), std::string::npos);
  bert_param_read(s, "cls.predictions.bias", after.data(), 100);
  EXPECT_EQ(before, after);
  std::remove(path.c_str());
}

TEST_F(Session, CheckpointShapeMismatchNamesTensorAndShapes) {
  bert_session* other = nullptr;
  ASSERT_EQ(bert_session_create(
                R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                              "intermediate_size": 48, "max_position_embeddings": 64},
                    "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}})",
                nullptr, &other),
            BERT_OK);
  const std::string path = std::filesystem::temp_directory_path() / "bert_mismatch.h5";
  ASSERT_EQ(bert_checkpoint(other, path.c_str()), BERT_OK) << bert_last_error();
  bert_session_destroy(other);
  std::vector<float> before(32 * 64), after(32 * 64);
  const char* name = "bert.encoder.layer.0.intermediate.dense.weight";
  ASSERT_EQ(bert_param_read(s, name, before.data(), before.size()), BERT_OK);
  EXPECT_EQ(bert_checkpoint_load(s, path.c_str()), BERT_ERR_CHECKPOINT);
  std::string m = bert_last_error();
  EXPECT_NE(m.find(name), std::string::npos) << m;
  EXPECT_NE(m.find("[48, 32]"), std::string::npos) << m;
  EXPECT_NE(m.find("[64, 32]"), std::string::npos) << m;
  ASSERT_EQ(bert_param_read(s, name, after.data(), after.size()), BERT_OK);
  EXPECT_EQ(before, after) << "a refused checkpoint changed the weights";
  std::remove(path.c_str());
}

TEST_F(Session, CheckpointMissingTensor) {
  const std::string path = std::filesystem::temp_directory_path() / "bert_missing_tensor.h5";
  ASSERT_EQ(bert_checkpoint(s, path.c_str()), BERT_OK) << bert_last_error();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  ASSERT_GE(H5Ldelete(f, "/model/bert.pooler.dense.bias", H5P_DEFAULT), 0);
  H5Fclose(f);
  // The edit breaks the seal (a resealed file names the tensor: test_checkpoint_integrity.py).
  EXPECT_EQ(bert_checkpoint_load(s, path.c_str()), BERT_ERR_CHECKPOINT);
  EXPECT_NE(std::string(bert_last_error()).find("checkpoint '" + path + "' is corrupt"), std::string::npos)
      << bert_last_error();
  std::remove(path.c_str());
}

}  // namespace
