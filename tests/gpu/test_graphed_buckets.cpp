// CUDA graphs holding the gradient all-reduce's buckets (issue #14): with ranks to reduce over, the
// last micro-batch of a step is recorded with the buckets its backward pass starts, and a replay
// queues them again without the host starting any. The ranks here are two that hold the same
// batches (MirroredRanks: every sum is twice this rank's value, a kernel queued on the backend's
// stream as NCCL's would be), so the reduced and averaged gradient equals one rank's: the run with
// graphs must equal the run without and a one-rank run bit for bit (doubling and halving are
// exact), while the host starts buckets only in the steps that run or record directly. A replay
// that lost its buckets (half the gradient) or a bucket started twice (twice) would change the
// gradient norms (LAMB's trust ratio leaves the weights almost blind to the gradient's scale). On a
// GPU (in gpu_cuda_graphs) and under the emulation (emulated_graphed_buckets). NCCL itself inside
// a graph: tests/dist/test_nccl_gpu.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "kernels/optimizer.h"
#include "session/session.h"

namespace bert {
namespace {

constexpr int kWorld = 2;

// Rank 0 of kWorld ranks that hold the same values: a sum is kWorld times them.
class MirroredRanks final : public Communicator {
 public:
  int64_t buckets_started = 0;  // start_allreduce_sum calls made by the host
  void* stream = nullptr;       // the backend's (set once the session made it)

  int rank() const override { return 0; }
  int world_size() const override { return kWorld; }
  std::string name() const override { return "mirrored"; }
  void allreduce_sum(float* data, int64_t n) override { times_world(data, n, stream); }
  void start_allreduce_sum(float* data, int64_t n, WirePrecision, void* backend_stream) override {
    ++buckets_started;
    times_world(data, n, backend_stream);
  }
  void allreduce_host(float* data, int64_t n, ReduceOp op) override {
    if (op == ReduceOp::sum)
      for (int64_t i = 0; i < n; ++i) data[i] *= kWorld;
  }
  void broadcast(float*, int64_t) override {}
  void allreduce_sum_host(double* data, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) data[i] *= kWorld;
  }
  void all_gather(float*, const std::vector<int64_t>&) override {
    fail(Code::internal, "MirroredRanks has no all_gather (the test shards no optimizer)");
  }
  std::vector<std::string> allgather_text(const std::string& text) override {
    return std::vector<std::string>(kWorld, text);
  }

 private:
  static void times_world(float* data, int64_t n, void* on) {
    kernels::scale(data, static_cast<float>(kWorld), n, static_cast<cudaStream_t>(on));
  }
};

struct Trained {
  std::vector<float> losses, params;
  std::vector<double> grad_norms;  // of the reduced gradient (the optimizers are nearly blind to its scale)
  RecordingCounts recordings;
  int64_t buckets_started = 0;
};

constexpr int kSteps = 4;

// A small BERT in bf16 with dropout, two micro-batches per step, 1 KiB buckets, on kWorld
// mirrored ranks or (mirrored false) the local communicator.
Trained train(bool cuda_graphs, bool mirrored) {
  const std::string graphs = cuda_graphs ? "true" : "false";
  const SessionConfig config = parse_session_config(R"({"device": "cuda",
      "model": {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                "intermediate_size": 64, "max_position_embeddings": 32},
      "train": {"micro_batch": 4, "accumulation_steps": 2, "steps": 10, "lr": 0.01, "seed": 5,
                "dropout": true, "precision": "bf16", "cuda_graphs": )" + graphs + R"(},
      "data": {"max_seq_length": 16, "max_predictions_per_seq": 3, "unpad": false},
      "dist": {"bucket_mb": 0.001}})");
  auto ranks = std::make_unique<MirroredRanks>();
  MirroredRanks* mirror = ranks.get();
  std::unique_ptr<Communicator> comm = mirrored ? std::unique_ptr<Communicator>(std::move(ranks))
                                                : make_local_communicator();
  Session session(config, std::move(comm), [&](std::unique_ptr<Ops> ops) {
    mirror->stream = ops->native_stream();
    return ops;
  });
  Trained run;
  for (int step = 0; step < kSteps; ++step) {
    const StepStats s = session.step(nullptr);  // the session's synthetic batches (rank 0's in all runs)
    run.losses.insert(run.losses.end(), {static_cast<float>(s.mlm_loss), static_cast<float>(s.nsp_loss)});
    run.grad_norms.push_back(s.grad_norm);
  }
  const int64_t n = session.model().params().total_elems;
  run.params.resize(n);
  session.ops().download(run.params.data(), session.model().param_data(), n * sizeof(float));
  run.recordings = session.model().recording_counts();
  run.buckets_started = mirrored ? mirror->buckets_started : 0;
  return run;
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  size_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return count;
}

TEST(GraphedBuckets, ReplaysReduceTheGradientAsTheDirectRunDoes) {
  const Trained one_rank = train(false, false);
  const Trained direct = train(false, true);
  const Trained graphed = train(true, true);

  // Without graphs every step's last backward pass starts the same buckets on the host: the
  // embeddings', each layer's and the heads' (at least 3 with 1 KiB buckets).
  ASSERT_EQ(direct.buckets_started % kSteps, 0);
  const int64_t per_step = direct.buckets_started / kSteps;
  EXPECT_GE(per_step, 3);
  // With graphs the host starts them only while the last micro-batch runs directly (step 1) or is
  // recorded; the other steps replay them.
  EXPECT_GT(graphed.recordings.replayed, 0);
  EXPECT_LT(graphed.buckets_started, direct.buckets_started);
  EXPECT_EQ(graphed.buckets_started % per_step, 0);

  ASSERT_EQ(graphed.params.size(), direct.params.size());
  EXPECT_EQ(differing(graphed.losses, direct.losses), 0u);
  EXPECT_EQ(graphed.grad_norms, direct.grad_norms);
  EXPECT_EQ(direct.grad_norms, one_rank.grad_norms) << "two mirrored ranks against one";
  EXPECT_EQ(differing(graphed.params, direct.params), 0u) << "of " << direct.params.size() << " parameters";
  EXPECT_EQ(differing(direct.params, one_rank.params), 0u) << "two mirrored ranks against one";
  EXPECT_NE(direct.losses[0], direct.losses[2 * (kSteps - 1)]) << "the weights must change between steps";
  std::printf("[ info ] %lld buckets per step; the host started %lld of %lld with graphs (%lld recorded, %lld replays)\n",
              static_cast<long long>(per_step), static_cast<long long>(graphed.buckets_started),
              static_cast<long long>(direct.buckets_started), static_cast<long long>(graphed.recordings.recorded),
              static_cast<long long>(graphed.recordings.replayed));
}

}  // namespace
}  // namespace bert
