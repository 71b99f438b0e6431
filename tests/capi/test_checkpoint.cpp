// Checkpoints through the C ABI: exact resume (bit-identical losses) with host batches and with
// the session's own data, weights-only loading, retention, resuming the newest valid checkpoint,
// corruption refused without changing the session, phase rules, and a checkpoint.dir owned by one
// run (another run's session may not write there; resume continues only the owning run).
#include <bert.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "test_batch.h"

namespace fs = std::filesystem;

namespace {

std::string config(const std::string& extra_train = "", const std::string& checkpoint = "") {
  return R"({"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 64, "max_position_embeddings": 64},
            "train": {"micro_batch": 4, "accumulation_steps": 2, "steps": 12, "lr": 0.02, "threads": 1,
                      "warmup_proportion": 0.25)" +
         extra_train + R"(},
            "data": {"max_seq_length": 32, "max_predictions_per_seq": 5})" +
         (checkpoint.empty() ? "" : ", \"checkpoint\": " + checkpoint) + "}";
}

bert_session* create(const std::string& c) {
  bert_session* s = nullptr;
  EXPECT_EQ(bert_session_create(c.c_str(), nullptr, &s), BERT_OK) << bert_last_error();
  return s;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("bert_ckpt_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Losses of steps [from, to) using the session's own data (batch == nullptr) or host batches.
std::vector<float> train(bert_session* s, int from, int to, bool host_batches) {
  std::vector<float> losses;
  for (int i = from; i < to; ++i) {
    bert_step_result r;
    bert_step_result_init(&r);
    TestBatch t(8, 24, 4, 100, 1000 + i);
    bert_batch b = t.view();
    EXPECT_EQ(bert_step(s, host_batches ? &b : nullptr, &r), BERT_OK) << bert_last_error();
    losses.push_back(r.loss);
  }
  return losses;
}

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << "step " << i << ": " << a[i] << " vs " << b[i];
  }
}

// (host batches or the session's own data, optimizer)
class ExactResume : public ::testing::TestWithParam<std::tuple<bool, const char*>> {};

TEST_P(ExactResume, LossesAfterResumeAreBitIdentical) {
  const auto [host, optimizer] = GetParam();
  const std::string with_optimizer = std::string(R"(, "optimizer": ")") + optimizer + "\"";
  const int N = 5;
  bert_session* straight = create(config(with_optimizer));
  std::vector<float> reference = train(straight, 0, 2 * N, host);
  bert_session_destroy(straight);

  const fs::path dir = temp_dir(std::string(host ? "host_" : "own_") + optimizer);
  const std::string path = (dir / "mid.h5").string();
  bert_session* first = create(config(with_optimizer));
  train(first, 0, N, host);
  ASSERT_EQ(bert_checkpoint(first, path.c_str()), BERT_OK) << bert_last_error();
  bert_session_destroy(first);

  // A different init: everything must come from the file.
  bert_session* second = create(config(with_optimizer + ", \"seed\": 999"));
  ASSERT_EQ(bert_checkpoint_load(second, path.c_str()), BERT_OK) << bert_last_error();
  std::vector<float> resumed = train(second, N, 2 * N, host);
  bert_session_destroy(second);
  expect_bitwise(std::vector<float>(reference.begin() + N, reference.end()), resumed);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(HostBatchesAndOwnData, ExactResume,
                         ::testing::Combine(::testing::Bool(), ::testing::Values("lamb", "sgd")));

// An optimizer keeps the slots it declares (SGD: one momentum buffer, no update buffer; LAMB: two
// moments and the update), and a checkpoint of one optimizer's slots is refused by a session of an
// optimizer with other slots, naming both, with the session unchanged.
TEST(Checkpoint, OptimizerSlotsAreTheOptimizersOwn) {
  bert_session* sgd = create(config(R"(, "optimizer": "sgd")"));
  bert_session* lamb = create(config());
  bert_memory_info m_sgd, m_lamb;
  bert_memory_info_init(&m_sgd);
  bert_memory_info_init(&m_lamb);
  ASSERT_EQ(bert_session_memory(sgd, &m_sgd), BERT_OK);
  ASSERT_EQ(bert_session_memory(lamb, &m_lamb), BERT_OK);
  EXPECT_EQ(m_sgd.optimizer_bytes, m_sgd.parameter_bytes);
  EXPECT_EQ(m_lamb.optimizer_bytes, 3 * m_lamb.parameter_bytes);

  const fs::path dir = temp_dir("slots");
  const std::string path = (dir / "sgd.h5").string();
  train(sgd, 0, 2, true);
  ASSERT_EQ(bert_checkpoint(sgd, path.c_str()), BERT_OK) << bert_last_error();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_GT(H5Lexists(f, "/optimizer/momentum_buffer", H5P_DEFAULT), 0);
  EXPECT_GT(H5Lexists(f, "/optimizer/momentum_buffer/bert.pooler.dense.weight", H5P_DEFAULT), 0);
  EXPECT_EQ(H5Lexists(f, "/optimizer/exp_avg", H5P_DEFAULT), 0);
  H5Fclose(f);

  train(lamb, 0, 1, true);
  EXPECT_EQ(bert_checkpoint_load(lamb, path.c_str()), BERT_ERR_CHECKPOINT);
  const std::string message = bert_last_error();
  EXPECT_NE(message.find("holds optimizer state (momentum_buffer) but this optimizer keeps (exp_avg, exp_avg_sq)"),
            std::string::npos) << message;
  TestBatch t(8, 24, 4, 100, 7);
  bert_batch b = t.view();
  bert_step_result r;
  bert_step_result_init(&r);
  ASSERT_EQ(bert_step(lamb, &b, &r), BERT_OK) << bert_last_error();
  EXPECT_EQ(r.step, 2) << "the refused load changed the session";
  bert_session_destroy(sgd);
  bert_session_destroy(lamb);
  fs::remove_all(dir);
}

TEST(Checkpoint, WeightsOnlyKeepsOptimizerAndStep) {
  const fs::path dir = temp_dir("weights");
  const std::string path = (dir / "w.h5").string();
  bert_session* a = create(config());
  train(a, 0, 3, false);
  ASSERT_EQ(bert_checkpoint(a, path.c_str()), BERT_OK);
  bert_session* b = create(config(", \"seed\": 5"));
  ASSERT_EQ(bert_checkpoint_load_weights(b, path.c_str()), BERT_OK) << bert_last_error();
  std::vector<float> wa(64 * 32), wb(64 * 32);
  bert_param_read(a, "bert.encoder.layer.1.intermediate.dense.weight", wa.data(), wa.size());
  bert_param_read(b, "bert.encoder.layer.1.intermediate.dense.weight", wb.data(), wb.size());
  EXPECT_EQ(wa, wb);
  bert_step_result r;
  bert_step_result_init(&r);
  ASSERT_EQ(bert_step(b, nullptr, &r), BERT_OK);
  EXPECT_EQ(r.step, 1) << "weights-only load must not move the step";
  bert_session_destroy(a);
  bert_session_destroy(b);
  fs::remove_all(dir);
}

TEST(Checkpoint, InitCheckpointStartsPhaseTwoFromPhaseOne) {
  const fs::path dir = temp_dir("phase");
  const std::string p1 = (dir / "phase1.h5").string();
  bert_session* a = create(config());
  train(a, 0, 4, false);
  ASSERT_EQ(bert_checkpoint(a, p1.c_str()), BERT_OK);
  // Resuming a phase-1 checkpoint in a phase-2 run is refused with a hint.
  bert_session* wrong = create(config(", \"phase\": 2"));
  EXPECT_EQ(bert_checkpoint_load(wrong, p1.c_str()), BERT_ERR_CHECKPOINT);
  EXPECT_NE(std::string(bert_last_error()).find("init_checkpoint"), std::string::npos) << bert_last_error();
  bert_session_destroy(wrong);
  // Phase 2 starts from the phase-1 weights with a fresh step, schedule and data cursor.
  bert_session* b = create(config(", \"phase\": 2, \"init_checkpoint\": \"" + p1 + "\""));
  std::vector<float> wa(100 * 32), wb(100 * 32);
  bert_param_read(a, "bert.embeddings.word_embeddings.weight", wa.data(), wa.size());
  bert_param_read(b, "bert.embeddings.word_embeddings.weight", wb.data(), wb.size());
  EXPECT_EQ(wa, wb);
  bert_step_result r;
  bert_step_result_init(&r);
  ASSERT_EQ(bert_step(b, nullptr, &r), BERT_OK);
  EXPECT_EQ(r.step, 1);
  EXPECT_NEAR(r.learning_rate, 0.02 * (1.0 / 12) / 0.25, 1e-7) << "phase 2 restarts the warmup";
  const std::string p2 = (dir / "phase2.h5").string();
  ASSERT_EQ(bert_checkpoint(b, p2.c_str()), BERT_OK);
  bert_session* c = create(config(", \"phase\": 2"));
  EXPECT_EQ(bert_checkpoint_load(c, p2.c_str()), BERT_OK) << bert_last_error();
  bert_session_destroy(a);
  bert_session_destroy(b);
  bert_session_destroy(c);
  fs::remove_all(dir);
}

TEST(Checkpoint, ManagedDirectoryRetentionAndResume) {
  const fs::path dir = temp_dir("managed");
  const std::string ckpt = "{\"dir\": \"" + dir.string() + "\", \"keep\": 2, \"keep_every\": 4}";
  bert_session* s = create(config("", ckpt));
  for (int i = 0; i < 6; ++i) {
    train(s, i, i + 1, false);
    ASSERT_EQ(bert_checkpoint(s, nullptr), BERT_OK) << bert_last_error();
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ckpt_4.h5", "ckpt_5.h5", "ckpt_6.h5"}));

  // Corrupt the newest: resume stops, naming it and why, and leaves the session and the file as
  // they were (a resumed run would write ckpt_6.h5 over it).
  const std::string corrupt = (dir / "ckpt_6.h5").string();
  {
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(corrupt) / 2));
    f.write("garbage!garbage!", 16);
  }
  bert_session* r = create(config("", ckpt));
  int64_t step = 123;
  ASSERT_EQ(bert_checkpoint_resume(r, nullptr, &step), BERT_ERR_CHECKPOINT);
  const std::string m = bert_last_error();
  EXPECT_NE(m.find("1 checkpoint(s) fail verification and the newest valid one is '" + (dir / "ckpt_5.h5").string()),
            std::string::npos) << m;
  EXPECT_NE(m.find("checkpoint '" + corrupt + "' is corrupt: checksum mismatch"), std::string::npos) << m;
  EXPECT_NE(m.find("checkpoint.discard_invalid"), std::string::npos) << m;
  EXPECT_EQ(step, 123);
  EXPECT_TRUE(fs::exists(corrupt));
  bert_step_result first;
  bert_step_result_init(&first);
  ASSERT_EQ(bert_step(r, nullptr, &first), BERT_OK) << bert_last_error();
  EXPECT_EQ(first.step, 1) << "a refused resume changed the session";
  bert_session_destroy(r);
  // checkpoint.discard_invalid renames it aside and takes ckpt_5.
  const std::string discard = "{\"dir\": \"" + dir.string() + "\", \"keep\": 2, \"keep_every\": 4, \"discard_invalid\": true}";
  r = create(config("", discard));
  ASSERT_EQ(bert_checkpoint_resume(r, nullptr, &step), BERT_OK) << bert_last_error();
  EXPECT_EQ(step, 5);
  EXPECT_FALSE(fs::exists(corrupt));
  EXPECT_TRUE(fs::exists(corrupt + ".invalid"));
  bert_session_destroy(r);
  // With every checkpoint invalid, resume stops naming each (none is valid), never starting over.
  for (const char* name : {"ckpt_4.h5", "ckpt_5.h5"}) {
    std::fstream f(dir / name, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(dir / name) / 2));
    f.write("garbage!garbage!", 16);
  }
  r = create(config("", ckpt));
  ASSERT_EQ(bert_checkpoint_resume(r, nullptr, &step), BERT_ERR_CHECKPOINT);
  const std::string all = bert_last_error();
  EXPECT_NE(all.find("2 checkpoint(s) fail verification and none of them is valid"), std::string::npos) << all;
  for (const char* name : {"ckpt_4.h5", "ckpt_5.h5"}) {
    EXPECT_NE(all.find("checkpoint '" + (dir / name).string() + "' is corrupt"), std::string::npos) << all;
  }
  bert_session_destroy(r);
  bert_session* empty = create(config());
  const fs::path none = temp_dir("none");
  ASSERT_EQ(bert_checkpoint_resume(empty, none.c_str(), &step), BERT_OK);
  EXPECT_EQ(step, -1);
  bert_session_destroy(empty);
  bert_session_destroy(s);
  fs::remove_all(dir);
  fs::remove_all(none);
}

TEST(Checkpoint, UnwritableDirIsReportedAtCreation) {
  bert_session* s = reinterpret_cast<bert_session*>(0x1);
  std::string c = config("", "{\"dir\": \"/nonexistent/checkpoints\"}");
  EXPECT_EQ(bert_session_create(c.c_str(), nullptr, &s), BERT_ERR_CONFIG);
  EXPECT_NE(std::string(bert_last_error()).find("checkpoint.dir"), std::string::npos) << bert_last_error();
}

// A model with more tensors than BERT-large (48 layers: 784 tensors per group against 396) saves
// and resumes bit-exact: its tensor index (over 64 KB, which HDF5 refuses as an attribute) is a
// dataset, and so are the config and state.
TEST(Checkpoint, MoreTensorsThanBertLargeResumeBitExact) {
  const std::string deep = R"({"model": {"vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 48,
      "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 32},
      "train": {"micro_batch": 2, "steps": 6, "threads": 1, "lr": 0.01},
      "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}})";
  const fs::path dir = temp_dir("deep");
  const std::string path = (dir / "deep.h5").string();
  bert_session* straight = create(deep);
  std::vector<float> reference;
  bert_step_result r;
  bert_step_result_init(&r);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(bert_step(straight, nullptr, &r), BERT_OK) << bert_last_error();
    reference.push_back(r.loss);
    if (i == 1) {
      ASSERT_EQ(bert_checkpoint(straight, path.c_str()), BERT_OK) << bert_last_error();
    }
  }
  bert_session_destroy(straight);

  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t index = H5Dopen2(f, "/metadata/index", H5P_DEFAULT);
  ASSERT_GE(index, 0) << "no /metadata/index dataset";
  hid_t type = H5Dget_type(index);
  EXPECT_GT(H5Tget_size(type), size_t{64} << 10) << "the test no longer exceeds HDF5's attribute limit";
  H5Tclose(type);
  H5Dclose(index);
  H5Fclose(f);

  bert_session* resumed = create(deep);
  ASSERT_EQ(bert_checkpoint_load(resumed, path.c_str()), BERT_OK) << bert_last_error();
  std::vector<float> after;
  for (int i = 2; i < 4; ++i) {
    ASSERT_EQ(bert_step(resumed, nullptr, &r), BERT_OK) << bert_last_error();
    after.push_back(r.loss);
  }
  bert_session_destroy(resumed);
  expect_bitwise(std::vector<float>(reference.begin() + 2, reference.end()), after);
  fs::remove_all(dir);
}

// Each corruption is refused with a message naming the problem; the session is unchanged.
class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = temp_dir("corrupt");
    good = (dir / "good.h5").string();
    s = create(config());
    train(s, 0, 2, false);
    ASSERT_EQ(bert_checkpoint(s, good.c_str()), BERT_OK);
    other = create(config(", \"seed\": 77"));
    before.resize(32 * 32);
    bert_param_read(other, "bert.pooler.dense.weight", before.data(), before.size());
  }
  void TearDown() override {
    std::vector<float> after(before.size());
    bert_param_read(other, "bert.pooler.dense.weight", after.data(), after.size());
    EXPECT_EQ(before, after) << "a refused checkpoint changed the session";
    bert_session_destroy(s);
    bert_session_destroy(other);
    fs::remove_all(dir);
  }
  std::string refuse(const std::string& path) {
    EXPECT_NE(bert_checkpoint_load(other, path.c_str()), BERT_OK);
    return bert_last_error();
  }
  fs::path dir;
  std::string good;
  bert_session *s = nullptr, *other = nullptr;
  std::vector<float> before;
};

TEST_F(Corruption, FlippedBytesFailTheChecksum) {
  // Flip bytes inside a tensor's data: find the pooler weight's raw bytes in the file.
  std::vector<float> w(32 * 32);
  bert_param_read(s, "bert.pooler.dense.weight", w.data(), w.size());
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t at = bytes.find(std::string(reinterpret_cast<const char*>(w.data()), 64));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] ^= 0x40;
  const std::string path = (dir / "flipped.h5").string();
  std::ofstream(path, std::ios::binary) << bytes;
  std::string m = refuse(path);
  EXPECT_NE(m.find("checksum"), std::string::npos) << m;
}

TEST_F(Corruption, TruncatedFile) {
  const std::string path = (dir / "truncated.h5").string();
  fs::copy_file(good, path);
  fs::resize_file(path, fs::file_size(path) / 3);
  std::string m = refuse(path);
  EXPECT_NE(m.find(path), std::string::npos) << m;
}

TEST_F(Corruption, MissingTensor) {
  const std::string path = (dir / "missing.h5").string();
  fs::copy_file(good, path);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Ldelete(f, "/optimizer/exp_avg/bert.pooler.dense.bias", H5P_DEFAULT), 0);
  H5Fclose(f);
  // Any edit breaks the seal first (the inner checks of a resealed file: test_checkpoint_integrity.py).
  std::string m = refuse(path);
  EXPECT_NE(m.find("checkpoint '" + path + "' is corrupt: checksum mismatch"), std::string::npos) << m;
}

TEST_F(Corruption, DifferentModelSize) {
  const std::string path = (dir / "bigger.h5").string();
  bert_session* big = create(R"({"model": {"vocab_size": 100, "hidden_size": 48, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
      "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}})");
  ASSERT_EQ(bert_checkpoint(big, path.c_str()), BERT_OK);
  bert_session_destroy(big);
  std::string m = refuse(path);
  EXPECT_NE(m.find("[100, 48]"), std::string::npos) << m;
  EXPECT_NE(m.find("[100, 32]"), std::string::npos) << m;
}

}  // namespace

namespace {

// A save that fails for lack of space (simulated with RLIMIT_FSIZE) returns BERT_ERR_IO, leaves
// no partial file and the previous checkpoint intact, and training continues.
TEST(Checkpoint, FailedSaveKeepsPreviousCheckpointsAndTrainingContinues) {
  const fs::path dir = temp_dir("diskfull");
  const std::string ckpt = "{\"dir\": \"" + dir.string() + "\"}";
  bert_session* s = create(config("", ckpt));
  train(s, 0, 1, false);
  ASSERT_EQ(bert_checkpoint(s, nullptr), BERT_OK) << bert_last_error();
  const uintmax_t good_size = fs::file_size(dir / "ckpt_1.h5");

  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old_limit;
  getrlimit(RLIMIT_FSIZE, &old_limit);
  struct rlimit small = old_limit;
  small.rlim_cur = good_size / 4;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  train(s, 1, 2, false);
  const bert_status st = bert_checkpoint(s, nullptr);
  const std::string message = bert_last_error();
  setrlimit(RLIMIT_FSIZE, &old_limit);

  EXPECT_EQ(st, BERT_ERR_IO) << message;
  EXPECT_NE(message.find("ckpt_2.h5"), std::string::npos) << message;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"ckpt_1.h5"});
  EXPECT_EQ(bert_step(s, nullptr, nullptr), BERT_OK) << bert_last_error();
  bert_session* r = create(config("", ckpt));
  int64_t step = 0;
  ASSERT_EQ(bert_checkpoint_resume(r, nullptr, &step), BERT_OK) << bert_last_error();
  EXPECT_EQ(step, 1);
  bert_session_destroy(r);
  bert_session_destroy(s);
  fs::remove_all(dir);
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Checkpoint, DirectoryBelongsToOneRun) {
  const fs::path dir = temp_dir("owned"), other = temp_dir("owned_other");
  const std::string ckpt = "{\"dir\": \"" + dir.string() + "\", \"keep\": 10}";
  bert_session* a = create(config("", ckpt));
  for (int i = 0; i < 3; ++i) {
    train(a, i, i + 1, false);
    ASSERT_EQ(bert_checkpoint(a, nullptr), BERT_OK) << bert_last_error();
  }
  bert_session_destroy(a);
  const std::vector<std::string> written = {"ckpt_1.h5", "ckpt_2.h5", "ckpt_3.h5"};
  ASSERT_EQ(listing(dir), written);
  const uintmax_t size_1 = fs::file_size(dir / "ckpt_1.h5");

  // A fresh session (another run) may not write into it: not even ckpt_1.h5, which it would replace.
  bert_session* b = create(config("", ckpt));
  train(b, 0, 1, false);
  EXPECT_EQ(bert_checkpoint(b, nullptr), BERT_ERR_CHECKPOINT);
  const std::string message = bert_last_error();
  EXPECT_NE(message.find("checkpoint.dir '" + dir.string() + "' holds checkpoints of another run (run id "),
            std::string::npos) << message;
  EXPECT_NE(message.find(": ckpt_1.h5, ckpt_2.h5, ckpt_3.h5); this is run "), std::string::npos) << message;
  EXPECT_NE(message.find("bert_checkpoint_resume"), std::string::npos) << message;
  EXPECT_EQ(listing(dir), written);
  // Its own files elsewhere are fine; so is a session that resumed the owning run.
  EXPECT_EQ(bert_checkpoint(b, (other / "b.h5").c_str()), BERT_OK) << bert_last_error();
  bert_session* resumed = create(config("", ckpt));
  int64_t step = 0;
  ASSERT_EQ(bert_checkpoint_resume(resumed, nullptr, &step), BERT_OK) << bert_last_error();
  EXPECT_EQ(step, 3);
  train(resumed, 3, 4, false);
  EXPECT_EQ(bert_checkpoint(resumed, nullptr), BERT_OK) << bert_last_error();
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"ckpt_1.h5", "ckpt_2.h5", "ckpt_3.h5", "ckpt_4.h5"}));
  EXPECT_EQ(fs::file_size(dir / "ckpt_1.h5"), size_1);
  bert_session_destroy(resumed);

  // A directory holding two runs' checkpoints: resume takes the run that wrote last (b, step 1),
  // not the older run's ckpt_4 with its higher step.
  const std::string other_ckpt = "{\"dir\": \"" + other.string() + "\", \"keep\": 10}";
  bert_session* c = create(config("", other_ckpt));
  train(c, 0, 2, false);
  ASSERT_EQ(bert_checkpoint(c, nullptr), BERT_OK) << bert_last_error();
  bert_session_destroy(c);
  fs::copy_file(dir / "ckpt_4.h5", other / "ckpt_4.h5");
  bert_session* d = create(config("", other_ckpt));
  ASSERT_EQ(bert_checkpoint_resume(d, nullptr, &step), BERT_OK) << bert_last_error();
  EXPECT_EQ(step, 2);
  bert_session_destroy(d);
  bert_session_destroy(b);
  fs::remove_all(dir);
  fs::remove_all(other);
}

}  // namespace
