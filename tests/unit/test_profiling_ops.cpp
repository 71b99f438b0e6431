// ProfilingOps: a session whose backend is profiled trains bit-identically to a plain one, and
// the profile counts the calls the model makes (per layer: four dense layers forward, one with
// an activation, one attention) and attributes time to them.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backend/profiling_ops.h"
#include "session/session.h"

namespace bert {
namespace {

constexpr int kLayers = 3;

SessionConfig tiny() {
  return parse_session_config(R"({"model": {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 3,
      "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32},
      "train": {"micro_batch": 2, "threads": 1, "steps": 4}, "data": {"max_seq_length": 16, "max_predictions_per_seq": 3}})");
}

TEST(ProfilingOps, TrainsExactlyLikeTheBackendItWrapsAndCountsItsCalls) {
  Session plain(tiny(), make_local_communicator());
  ProfilingOps* profile = nullptr;
  Session profiled(tiny(), make_local_communicator(), [&](std::unique_ptr<Ops> ops) {
    auto wrapped = std::make_unique<ProfilingOps>(std::move(ops));
    profile = wrapped.get();
    return wrapped;
  });
  ASSERT_NE(profile, nullptr);
  EXPECT_NE(profiled.ops().name().find("(profiled)"), std::string::npos);
  profile->reset();
  for (int step = 0; step < 3; ++step) {
    const StepStats a = plain.step(nullptr), b = profiled.step(nullptr);
    EXPECT_EQ(a.loss, b.loss) << "step " << step;  // bit-identical: the wrapper only forwards
  }
  const auto& t = profile->timings();
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

}  // namespace
}  // namespace bert
