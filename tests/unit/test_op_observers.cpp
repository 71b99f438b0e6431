// Observers of the Ops calls: told of each public call before and after it, in order, never of
// calls made while one runs (a backend's own, an observer's synchronize); OpProfiler on a session
// trains bit-identically and counts the calls the model makes; train.debug_sync (OpSyncCheck)
// leaves training bit-identical and is refused with CUDA graphs. What OpSyncCheck names on a
// failing device is tested where device work can fail later: tests/gpu/test_cuda_ops.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../expect_error.h"
#include "backend/op_sync_check.h"
#include "perf/op_profiler.h"
#include "session/session.h"

namespace bert {
namespace {

constexpr int kLayers = 3;

SessionConfig tiny(const std::string& train_extra = "") {
  return parse_session_config(R"({"model": {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 3,
      "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32},
      "train": {"micro_batch": 2, "threads": 1, "steps": 4)" + train_extra + R"(},
      "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}})");
}

// Writes "before op" / "after op" lines; synchronises inside before(), which must not be reported.
class Recorder final : public OpObserver {
 public:
  std::vector<std::string> events;
  void before(Ops& ops, const char* op) override {
    events.push_back(std::string("before ") + op);
    ops.synchronize();
  }
  void after(Ops& ops, const char* op) override {
    (void)ops;
    events.push_back(std::string("after ") + op);
  }
};

TEST(OpObservers, AreToldOfEachPublicCallInOrderAndNotOfTheirOwn) {
  std::unique_ptr<Ops> ops = make_cpu_ops(1);
  Recorder first, second;
  ops->add_observer(&first);
  ops->add_observer(&second);
  auto* x = static_cast<float*>(ops->alloc(4 * sizeof(float)));
  const std::vector<float> host = {1, 2, 3, 4};
  ops->upload(x, host.data(), sizeof(float) * host.size());
  ops->scale(x, 2.0f, 4);
  ops->remove_observer(&second);
  std::vector<float> back(4);
  ops->download(back.data(), x, sizeof(float) * back.size());
  ops->release(x);
  EXPECT_EQ(back, (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(first.events, (std::vector<std::string>{"before alloc", "after alloc", "before upload", "after upload",
                                                    "before scale", "after scale", "before download",
                                                    "after download", "before release", "after release"}));
  EXPECT_EQ(second.events, (std::vector<std::string>{"before alloc", "after alloc", "before upload", "after upload",
                                                     "before scale", "after scale"}));
  ops->remove_observer(&first);
}

TEST(OpProfiler, TrainsExactlyLikeTheUnobservedBackendAndCountsItsCalls) {
  Session plain(tiny(), make_local_communicator());
  OpProfiler profile;
  Session profiled(tiny(), make_local_communicator());
  profiled.ops().add_observer(&profile);
  for (int step = 0; step < 3; ++step) {
    const StepStats a = plain.step(nullptr), b = profiled.step(nullptr);
    EXPECT_EQ(a.loss, b.loss) << "step " << step;  // bit-identical: observing changes nothing
  }
  profiled.ops().remove_observer(&profile);
  const auto& t = profile.timings();
  ASSERT_TRUE(t.count("linear_fwd+activation"));
  ASSERT_TRUE(t.count("attention_fwd"));
  // Per step: the GELU dense layer of each encoder layer, the MLM transform's GELU, the pooler's tanh.
  EXPECT_EQ(t.at("linear_fwd+activation").calls, 3 * (kLayers + 2));
  EXPECT_EQ(t.at("attention_fwd").calls, 3 * kLayers);
  EXPECT_EQ(t.at("attention_bwd").calls, 3 * kLayers);
  double total = 0;
  for (const auto& [name, timing] : t) {
    EXPECT_GT(timing.calls, 0) << name;
    EXPECT_GE(timing.seconds, 0) << name;
    total += timing.seconds;
  }
  EXPECT_GT(total, 0);
}

TEST(OpSyncCheck, DebugSyncTrainsExactlyLikeWithoutIt) {
  Session plain(tiny(), make_local_communicator());
  Session checked(tiny(R"(, "debug_sync": true)"), make_local_communicator());
  for (int step = 0; step < 3; ++step) EXPECT_EQ(plain.step(nullptr).loss, checked.step(nullptr).loss) << step;
}

TEST(OpSyncCheck, DebugSyncIsRefusedWithCudaGraphs) {
  testing::expect_error(
      [] {
        parse_session_config(R"({"model": "bert-tiny", "device": "cuda",
            "train": {"debug_sync": true, "cuda_graphs": true}})");
      },
      Code::config, {"config key 'train.cuda_graphs' = true records work that may not wait for the device, and "
                     "'train.debug_sync' waits after every op: set one of them to false"});
}

}  // namespace
}  // namespace bert
