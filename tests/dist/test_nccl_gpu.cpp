// The NCCL path on the GPUs present (exit 77 — meson's "skipped" — without one). One process:
// a 1-rank communicator, still through NCCL (init, broadcast of the initial weights, gradient
// all-reduce, host all-reduce), must train exactly like the local communicator, also with small
// buckets started during backward (also recorded in CUDA graphs), with the optimizer sharded, and
// within the rounding bounds with a bf16/fp16 wire; under mpirun with one GPU per rank the same
// program checks W ranks against one process. Also built over the emulated GPU and NCCL
// (tests/kernel_emu: emulated_nccl*).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bert.h"
#include "dist_batches.h"

namespace {

int env_int(const char* key, int fallback) {
  const char* v = std::getenv(key);
  return v ? std::atoi(v) : fallback;
}

const int g_rank = env_int("OMPI_COMM_WORLD_RANK", 0), g_world = env_int("OMPI_COMM_WORLD_SIZE", 1);

std::string config(int micro, const std::string& dist_extra = "", const std::string& train_extra = "") {
  return R"({"model": {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
      "intermediate_size": 32, "max_position_embeddings": 32}, "device": "cuda",
      "train": {"micro_batch": )" + std::to_string(micro) + R"(, "steps": 10, "dropout": false, "lr": 0.01)" +
         train_extra + R"(}, "data": {"max_seq_length": 16, "max_predictions_per_seq": 3},
      "dist": {"timeout_s": 60)" + dist_extra + "}}";
}

std::vector<float> run(bert_session* s, int first, int rows, int global_rows, std::vector<float>* losses) {
  bert_step_result r;
  bert_step_result_init(&r);
  for (int step = 0; step < 10; ++step) {
    GlobalBatch g(global_rows, 16, 3, 64, 1000 + step);
    bert_batch b = g.view(first, rows);
    EXPECT_EQ(bert_step(s, &b, &r), BERT_OK) << bert_last_error();
    float loss = r.loss;
    EXPECT_EQ(bert_allreduce_host(s, &loss, 1, BERT_REDUCE_MEAN), BERT_OK) << bert_last_error();
    losses->push_back(loss);
  }
  const char* name = nullptr;
  int ndim = 0;
  int64_t shape[4];
  EXPECT_EQ(bert_param_info(s, 0, &name, &ndim, shape), BERT_OK);
  std::vector<float> w(shape[0] * shape[1]);
  EXPECT_EQ(bert_param_read(s, name, w.data(), w.size()), BERT_OK) << bert_last_error();
  return w;
}

// W ranks through NCCL (buckets and wire precision from dist_extra) against one local process
// with the world's batch. exact_tol applies to one rank, tol to several.
void expect_matches_local(const std::string& dist_extra, const std::string& train_extra, double exact_tol, double tol,
                          int micro = 2) {
  bert_dist d;
  bert_dist_init(&d);
  d.backend = BERT_DIST_NCCL;
  if (g_world == 1) {  // one process: NCCL's own id, no launcher
    ASSERT_EQ(bert_dist_unique_id(d.nccl_unique_id), BERT_OK) << bert_last_error();
    d.has_nccl_unique_id = 1;
    d.rank = 0;
    d.world_size = 1;
  }
  bert_session* s = nullptr;
  ASSERT_EQ(bert_session_create(config(micro, dist_extra, train_extra).c_str(), &d, &s), BERT_OK) << bert_last_error();
  std::vector<float> got_loss, want_loss;
  const std::vector<float> got = run(s, 2 * g_rank, 2, 2 * g_world, &got_loss);
  bert_session_destroy(s);

  bert_dist local;
  bert_dist_init(&local);
  local.backend = BERT_DIST_LOCAL;
  ASSERT_EQ(bert_session_create(config(2 * g_world, "", train_extra).c_str(), &local, &s), BERT_OK) << bert_last_error();
  const std::vector<float> want = run(s, 0, 2 * g_world, 2 * g_world, &want_loss);
  bert_session_destroy(s);
  const double limit = g_world == 1 ? exact_tol : tol;
  for (size_t i = 0; i < got_loss.size(); ++i) EXPECT_NEAR(got_loss[i], want_loss[i], limit) << "step " << i + 1;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  EXPECT_LE(worst, limit);
  std::printf("[ info ] %s: largest weight difference %.3g\n", dist_extra.c_str(), worst);
}

// GPU GEMMs may sum in a different order for a different batch size: a looser bound than the CPU's.
TEST(NcclGpu, RanksThroughNcclMatchOneLocalProcess) { expect_matches_local("", "", 0.0, 1e-4); }

TEST(NcclGpu, SmallBucketsOverlappingBackwardMatchOneLocalProcess) {
  expect_matches_local(R"(, "bucket_mb": 0.001)", "", 0.0, 1e-4);
}

// CUDA graphs: the last micro-batch's graph holds NCCL's bucket all-reduces, on NCCL's stream
// joined back to the backend's (thread-local capture, as nccl-tests do); its replays reduce as
// the direct run does. Micro-batch 1 with 2 rows per rank: two micro-batches per step, the
// first recorded without buckets (other GEMM shapes and a sum of two micro-batches than the local
// run's: its bound even for one rank).
TEST(NcclGpu, CudaGraphsHoldingTheBucketsMatchOneLocalProcess) {
  expect_matches_local(R"(, "bucket_mb": 0.001)", R"(, "cuda_graphs": true, "accumulation_steps": 2)", 1e-4, 1e-4, 1);
}

TEST(NcclGpu, CudaGraphsHoldingBf16WireBucketsMatchWithinBf16Rounding) {
  expect_matches_local(R"(, "bucket_mb": 0.001, "wire_precision": "bf16")",
                       R"(, "cuda_graphs": true, "accumulation_steps": 2)", 2e-3, 2e-3, 1);
}

// The distributed optimizer: each rank updates its range of the parameters (ranges of unequal
// size when the world does not divide them: NCCL reduces and broadcasts per rank's range).
TEST(NcclGpu, ShardedOptimizerMatchesOneLocalProcess) {
  expect_matches_local(R"(, "shard_optimizer": true)", "", 0.0, 1e-4);
}

// Wire rounding bounds as in tests/dist/test_dist_training.cpp (bf16 2e-3, fp16 with loss scaling 2e-4).
TEST(NcclGpu, Bf16WireMatchesWithinBf16Rounding) {
  expect_matches_local(R"(, "bucket_mb": 0.001, "wire_precision": "bf16")", "", 2e-3, 2e-3);
}

TEST(NcclGpu, Fp16WireWithLossScalingMatchesWithinFp16Rounding) {
  expect_matches_local(R"(, "wire_precision": "fp16")", R"(, "loss_scaling": "static", "loss_scale": 4096)", 2e-4, 2e-4);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  if (bert_finalize() != BERT_OK) {  // the library initialised MPI for the NCCL bootstrap
    std::fprintf(stderr, "bert_finalize: %s\n", bert_last_error());
    return 1;
  }
  return failed;
}
