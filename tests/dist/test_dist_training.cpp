// Data-parallel equivalence under mpirun (-np 2, -np 4): W ranks with micro-batch b (and
// accumulation k) must produce, step by step for 10 LAMB steps, the losses, gradient norms and
// final weights of one process with micro-batch W·b on the same samples. Also: the launch paths
// (bert_dist struct, Open MPI environment, torchrun-style RANK/WORLD_SIZE), config mismatch
// detection, per-rank clipping, and the host all-reduce. Every TEST is collective.
#include <gtest/gtest.h>
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bert.h"
#include "dist_batches.h"
#include "mpi_test_main.h"

namespace {

int g_rank = 0, g_world = 1;
constexpr int kVocab = 64, kSeq = 16, kPreds = 3, kSteps = 10;

std::string config(int micro, int accum, const std::string& extra_train = "",
                   const std::string& dist_section = R"({"timeout_s": 60})") {
  return R"({"model": {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
      "intermediate_size": 32, "max_position_embeddings": 32},
      "train": {"micro_batch": )" + std::to_string(micro) + R"(, "accumulation_steps": )" + std::to_string(accum) +
         R"(, "steps": 10, "threads": 1, "dropout": false, "lr": 0.01, "warmup_proportion": 0.2)" + extra_train +
         R"(}, "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}, "dist": )" + dist_section + "}";
}

bert_session* create(const std::string& cfg, const bert_dist* dist) {
  bert_session* s = nullptr;
  const bert_status st = bert_session_create(cfg.c_str(), dist, &s);
  EXPECT_EQ(st, BERT_OK) << bert_last_error();
  return s;
}

// kSteps steps of `s` fed rows [first, first + rows) of each step's global batch; the loss is
// the mean over ranks (bert_allreduce_host) when `reduce_loss`.
Trace train(bert_session* s, int global_rows, int first, int rows, bool reduce_loss) {
  Trace t;
  bert_step_result r;
  bert_step_result_init(&r);
  for (int step = 0; step < kSteps; ++step) {
    GlobalBatch g(global_rows, kSeq, kPreds, kVocab, 1000 + step);
    bert_batch b = g.view(first, rows);
    EXPECT_EQ(bert_step(s, &b, &r), BERT_OK) << bert_last_error();
    float loss = r.loss;
    if (reduce_loss) {
      EXPECT_EQ(bert_allreduce_host(s, &loss, 1, BERT_REDUCE_MEAN), BERT_OK) << bert_last_error();
    }
    t.loss.push_back(loss);
    t.grad_norm.push_back(r.grad_norm);
  }
  t.weights = all_weights(s);
  return t;
}

// W ranks × micro b × accumulation k against one local process with micro W·b, accumulation k,
// within `tol` (losses, gradient norms relative, weights).
void expect_equivalent(int micro, int accum, const bert_dist* dist, const std::string& extra_train = "",
                       const std::string& dist_section = R"({"timeout_s": 60})", double tol = 1e-5) {
  const int global_rows = g_world * micro * accum;
  bert_session* d = create(config(micro, accum, extra_train, dist_section), dist);
  ASSERT_NE(d, nullptr);
  const Trace got = train(d, global_rows, g_rank * micro * accum, micro * accum, true);
  bert_session_destroy(d);

  bert_dist local;
  bert_dist_init(&local);
  local.backend = BERT_DIST_LOCAL;
  bert_session* ref = create(config(g_world * micro, accum, extra_train), &local);
  ASSERT_NE(ref, nullptr);
  const Trace want = train(ref, global_rows, 0, global_rows, false);
  bert_session_destroy(ref);

  for (int step = 0; step < kSteps; ++step) {
    EXPECT_NEAR(got.loss[step], want.loss[step], tol) << "step " << step + 1 << " on rank " << g_rank;
    EXPECT_NEAR(got.grad_norm[step], want.grad_norm[step], tol * std::max(1.0f, want.grad_norm[step]))
        << "step " << step + 1 << " on rank " << g_rank;
  }
  ASSERT_EQ(got.weights.size(), want.weights.size());
  double worst = 0;
  for (size_t i = 0; i < got.weights.size(); ++i) worst = std::max(worst, std::fabs(double(got.weights[i]) - want.weights[i]));
  EXPECT_LT(worst, tol) << "largest weight difference after " << kSteps << " steps on rank " << g_rank;
  if (g_rank == 0) std::printf("[ info ] largest weight difference after %d steps: %.3g\n", kSteps, worst);
  // The run must have moved the weights: a no-op communicator would not be caught otherwise.
  EXPECT_GT(std::fabs(want.loss.front() - want.loss.back()), 1e-3);
}

TEST(Dist, MicroBatchEqualsOneProcessWithWorldTimesBatch) { expect_equivalent(2, 1, nullptr); }

TEST(Dist, GradientAccumulationEqualsOneProcess) { expect_equivalent(1, 3, nullptr); }

// 1 KiB buckets: the gradient is reduced in dozens of pieces started during the last
// micro-batch's backward pass; 0: one all-reduce after it. Both equal one process.
TEST(Dist, SmallOverlappingBucketsEqualOneProcess) {
  expect_equivalent(1, 2, nullptr, "", R"({"timeout_s": 60, "bucket_mb": 0.001})");
}

TEST(Dist, OneAllReduceAfterBackwardEqualsOneProcess) {
  expect_equivalent(2, 1, nullptr, "", R"({"timeout_s": 60, "bucket_mb": 0})");
}

// Gradients summed in bf16 / fp16 on the wire: each rank's share is rounded to 8 (bf16) or 11
// (fp16) significant bits, so the reduced gradient is within ~2^-8 (bf16) relative of the fp32
// one. Over 10 LAMB steps at lr 0.01 that moved weights by at most 7e-4 (bf16, 4 ranks) and
// 2.5e-5 (fp16); the limits are 2e-3 and 2e-4.
// fp16 needs loss scaling, as in mixed-precision training: unscaled, gradients below fp16's
// normal range (6e-5) lose bits on the wire (that run differs by 5e-4 here).
TEST(Dist, Bf16WireTrainsLikeOneProcessWithinBf16Rounding) {
  expect_equivalent(1, 2, nullptr, "", R"({"timeout_s": 60, "bucket_mb": 0.001, "wire_precision": "bf16"})", 2e-3);
}

TEST(Dist, Fp16WireTrainsLikeOneProcessWithinFp16Rounding) {
  expect_equivalent(2, 1, nullptr, R"(, "loss_scaling": "static", "loss_scale": 4096)",
                    R"({"timeout_s": 60, "wire_precision": "fp16"})", 2e-4);
}

TEST(Dist, ExplicitRankFromDistStruct) {
  bert_dist d;
  bert_dist_init(&d);
  d.backend = BERT_DIST_MPI;
  d.rank = g_rank;
  d.world_size = g_world;
  d.local_rank = g_rank;
  expect_equivalent(2, 1, &d);
}

// torchrun-style launch: only RANK/WORLD_SIZE/LOCAL_RANK are set (Open MPI carries the bytes).
class TorchrunEnv {
 public:
  explicit TorchrunEnv(int world) {
    for (const char* k : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
      saved_.emplace_back(k, std::getenv(k) ? std::getenv(k) : "");
      unsetenv(k);
    }
    setenv("RANK", std::to_string(g_rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(g_rank).c_str(), 1);
  }
  ~TorchrunEnv() {
    for (auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
    for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK"}) unsetenv(k);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST(Dist, TorchrunEnvironmentLaunch) {
  TorchrunEnv env(g_world);
  expect_equivalent(2, 1, nullptr);
}

TEST(Dist, TorchrunEnvironmentThatDisagreesWithMpiIsReported) {
  TorchrunEnv env(g_world + 1);
  bert_session* s = nullptr;
  EXPECT_EQ(bert_session_create(config(2, 1).c_str(), nullptr, &s), BERT_ERR_CONFIG);
  EXPECT_EQ(s, nullptr);
  const std::string msg = bert_last_error();
  EXPECT_NE(msg.find("RANK/WORLD_SIZE says rank " + std::to_string(g_rank) + " of " + std::to_string(g_world + 1)),
            std::string::npos)
      << msg;
}

TEST(Dist, ConfigMismatchBetweenRanksIsReportedOnEveryRank) {
  const int micro = g_rank == g_world - 1 ? 3 : 2;
  bert_session* s = nullptr;
  EXPECT_EQ(bert_session_create(config(micro, 1).c_str(), nullptr, &s), BERT_ERR_CONFIG);
  EXPECT_EQ(s, nullptr);
  const std::string msg = bert_last_error();
  EXPECT_NE(msg.find("train.micro_batch = 3 on rank " + std::to_string(g_world - 1) + " but 2 on rank 0"),
            std::string::npos)
      << msg;
}

TEST(Dist, HostAllreduceSumMeanMax) {
  bert_session* s = create(config(2, 1), nullptr);
  ASSERT_NE(s, nullptr);
  int rank = -1, world = -1, local = -1;
  ASSERT_EQ(bert_session_rank(s, &rank, &world, &local), BERT_OK) << bert_last_error();
  EXPECT_EQ(rank, g_rank);
  EXPECT_EQ(world, g_world);
  const char* local_env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");  // rank on its host (two_hosts_netns: 0 on each)
  EXPECT_EQ(local, local_env ? std::atoi(local_env) : g_rank);
  float sum[2] = {1.0f, float(g_rank)}, mean[1] = {float(g_rank)}, mx[1] = {float(g_rank * 10)};
  ASSERT_EQ(bert_allreduce_host(s, sum, 2, BERT_REDUCE_SUM), BERT_OK) << bert_last_error();
  ASSERT_EQ(bert_allreduce_host(s, mean, 1, BERT_REDUCE_MEAN), BERT_OK) << bert_last_error();
  ASSERT_EQ(bert_allreduce_host(s, mx, 1, BERT_REDUCE_MAX), BERT_OK) << bert_last_error();
  EXPECT_EQ(sum[0], float(g_world));
  EXPECT_EQ(sum[1], float(g_world * (g_world - 1) / 2));
  EXPECT_FLOAT_EQ(mean[0], (g_world - 1) / 2.0f);
  EXPECT_EQ(mx[0], float((g_world - 1) * 10));
  bert_session_destroy(s);
}

TEST(Dist, ParametersStartIdenticalOnEveryRank) {
  // Different seeds per rank; rank 0's initial weights must still reach every rank.
  bert_session* s = create(config(2, 1, ", \"seed\": " + std::to_string(7 + g_rank)), nullptr);
  ASSERT_NE(s, nullptr);
  std::vector<float> w = all_weights(s);
  std::vector<float> mx = w, mn = w;
  for (float& v : mn) v = -v;
  ASSERT_EQ(bert_allreduce_host(s, mx.data(), mx.size(), BERT_REDUCE_MAX), BERT_OK);
  ASSERT_EQ(bert_allreduce_host(s, mn.data(), mn.size(), BERT_REDUCE_MAX), BERT_OK);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(mx[i], -mn[i]) << "weight " << i << " differs between ranks";
  bert_session_destroy(s);
}

TEST(Dist, TheWorldUsesRankZerosSeed) {
  // The shard plan gives ranks disjoint files of one shuffle, which needs one seed: each rank's
  // resolved config carries rank 0's.
  bert_session* s = create(config(2, 1, ", \"seed\": " + std::to_string(7 + g_rank)), nullptr);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(std::strstr(bert_session_config(s), "\"seed\":7,"), nullptr) << bert_session_config(s);
  bert_session_destroy(s);
}

TEST(Dist, GlobalBatchDerivesAccumulationFromTheWorldSize) {
  const std::string cfg = R"({"model": "bert-tiny", "train": {"micro_batch": 2, "global_batch": )" +
                          std::to_string(2 * 3 * g_world) + R"(, "threads": 1}, "data": {"max_seq_length": 16,
      "max_predictions_per_seq": 3}, "dist": {"timeout_s": 60}})";
  bert_session* s = create(cfg, nullptr);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(std::strstr(bert_session_config(s), "\"accumulation_steps\":3,"), nullptr) << bert_session_config(s);
  bert_session_destroy(s);
  const std::string odd = R"({"model": "bert-tiny", "train": {"micro_batch": 2, "global_batch": )" +
                          std::to_string(2 * g_world + 1) + R"(}, "data": {"max_seq_length": 16,
      "max_predictions_per_seq": 3}, "dist": {"timeout_s": 60}})";
  bert_session* bad = nullptr;
  EXPECT_EQ(bert_session_create(odd.c_str(), nullptr, &bad), BERT_ERR_CONFIG);
  EXPECT_NE(std::strstr(bert_last_error(), "is not a multiple of train.micro_batch (2) x world size"), nullptr)
      << bert_last_error();
}

TEST(Dist, PerRankClippingBoundsTheReducedGradient) {
  // max_grad_norm far below the gradient's norm: clipped per rank before the sum, the reduced
  // (averaged) gradient's norm cannot exceed it; clipped after, the reported norm is unclipped.
  const std::string clip = ", \"max_grad_norm\": 0.01";
  GlobalBatch g(g_world * 2, kSeq, kPreds, kVocab, 77);
  bert_batch b = g.view(g_rank * 2, 2);
  bert_step_result r;
  bert_step_result_init(&r);
  bert_session* per_rank = create(config(2, 1, clip, R"({"timeout_s": 60, "clip_per_rank": true})"), nullptr);
  ASSERT_NE(per_rank, nullptr);
  ASSERT_EQ(bert_step(per_rank, &b, &r), BERT_OK) << bert_last_error();
  EXPECT_LE(r.grad_norm, 0.01f * (1 + 1e-5f));
  EXPECT_GT(r.grad_norm, 0.0f);
  bert_session_destroy(per_rank);
  bert_session* global = create(config(2, 1, clip), nullptr);
  ASSERT_NE(global, nullptr);
  ASSERT_EQ(bert_step(global, &b, &r), BERT_OK) << bert_last_error();
  EXPECT_GT(r.grad_norm, 0.1f);
  bert_session_destroy(global);
}

TEST(Dist, TokenImbalanceBetweenRanksIsLogged) {
  static std::vector<std::string> messages;
  messages.clear();
  bert_set_log_callback([](bert_log_level, const char* m, void*) { messages.emplace_back(m); }, nullptr);
  bert_session* s = create(config(2, 1, ", \"log_every\": 1"), nullptr);
  ASSERT_NE(s, nullptr);
  GlobalBatch g(2 * g_world, kSeq, kPreds, kVocab, 4242);
  bert_batch b = g.view(2 * g_rank, 2);
  bert_step_result r;
  bert_step_result_init(&r);
  ASSERT_EQ(bert_step(s, &b, &r), BERT_OK) << bert_last_error();
  bert_session_destroy(s);
  bert_set_log_callback(nullptr, nullptr);
  if (g_rank != 0) return;  // rank 0 reports
  std::vector<int> tokens(g_world, 0);
  for (int row = 0; row < 2 * g_world; ++row) {
    for (int t = 0; t < kSeq; ++t) tokens[row / 2] += g.mask[row * kSeq + t];
  }
  int heaviest = 0, sum = 0;
  for (int w = 0; w < g_world; ++w) {
    sum += tokens[w];
    if (tokens[w] > tokens[heaviest]) heaviest = w;
  }
  char expected[128];
  std::snprintf(expected, sizeof expected, "heaviest rank %d %d, imbalance %.2f%%", heaviest, tokens[heaviest],
                100.0 * (tokens[heaviest] * g_world / double(sum) - 1.0));
  bool found = false;
  for (const std::string& m : messages) found = found || m.find(expected) != std::string::npos;
  EXPECT_TRUE(found) << "no log message with '" << expected << "'";
}

// data.balance_ranks deals the pooled samples out again: the same global tokens per step (same
// mean per rank), a smaller gap between the heaviest rank and the mean.
TEST(Dist, BalancedRanksGetSimilarTokenCounts) {
  static std::vector<std::string> messages;
  auto run = [&](bool balance) {
    messages.clear();
    bert_set_log_callback([](bert_log_level, const char* m, void*) { messages.emplace_back(m); }, nullptr);
    std::string cfg = config(4, 1, R"(, "log_every": 1)");
    const std::string key = R"("max_predictions_per_seq": 3)";
    if (balance) cfg.replace(cfg.find(key), key.size(), key + R"(, "balance_ranks": true)");
    bert_session* s = create(cfg, nullptr);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(bert_step(s, nullptr, nullptr), BERT_OK) << bert_last_error();
    bert_session_destroy(s);
    bert_set_log_callback(nullptr, nullptr);
    std::vector<std::pair<double, double>> mean_and_imbalance;
    for (const std::string& m : messages) {
      double mean = 0, imbalance = 0;
      const size_t at = m.find("real tokens per rank: mean ");
      const size_t im = m.find("imbalance ");
      if (at == std::string::npos || im == std::string::npos) continue;
      std::sscanf(m.c_str() + at, "real tokens per rank: mean %lf", &mean);
      std::sscanf(m.c_str() + im, "imbalance %lf", &imbalance);
      mean_and_imbalance.emplace_back(mean, imbalance);
    }
    return mean_and_imbalance;
  };
  const auto plain = run(false), balanced = run(true);
  if (g_rank != 0) return;  // rank 0 reports
  ASSERT_EQ(plain.size(), 6u);
  ASSERT_EQ(balanced.size(), 6u);
  double plain_sum = 0, balanced_sum = 0;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(plain[i].first, balanced[i].first) << "step " << i << ": the global samples changed";
    plain_sum += plain[i].second;
    balanced_sum += balanced[i].second;
  }
  std::printf("mean token imbalance over 6 steps: %.2f%% drawn, %.2f%% balanced\n", plain_sum / 6, balanced_sum / 6);
  EXPECT_LT(balanced_sum, plain_sum);
  EXPECT_LT(balanced_sum / 6, 2.0);
}

// bert_checkpoint gathers every rank's data cursor (rank 0 writes); loading it in new sessions
// continues each rank's own data stream exactly: the next losses are bit-identical per rank.
TEST(Dist, CheckpointHoldsEveryRanksCursorAndResumesExactly) {
  int job = static_cast<int>(getpid());
  MPI_Bcast(&job, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::string path = "/tmp/bert_dist_ckpt_" + std::to_string(job) + ".h5";
  const std::string cfg = config(2, 1);
  bert_session* a = create(cfg, nullptr);
  bert_step_result r;
  bert_step_result_init(&r);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(bert_step(a, nullptr, &r), BERT_OK) << bert_last_error();
  ASSERT_EQ(bert_checkpoint(a, path.c_str()), BERT_OK) << bert_last_error();
  std::vector<float> straight;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(bert_step(a, nullptr, &r), BERT_OK) << bert_last_error();
    straight.push_back(r.loss);
  }
  bert_session_destroy(a);
  MPI_Barrier(MPI_COMM_WORLD);  // the file is complete before any rank reads it

  bert_session* b = create(cfg, nullptr);
  ASSERT_EQ(bert_checkpoint_load(b, path.c_str()), BERT_OK) << bert_last_error();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(bert_step(b, nullptr, &r), BERT_OK) << bert_last_error();
    EXPECT_EQ(std::memcmp(&r.loss, &straight[i], sizeof(float)), 0)
        << "rank " << g_rank << " step " << i << ": " << r.loss << " vs " << straight[i];
  }
  bert_session_destroy(b);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) std::remove(path.c_str());
}

}  // namespace

int main(int argc, char** argv) { return run_tests_with_host_mpi(argc, argv, g_rank, g_world); }
