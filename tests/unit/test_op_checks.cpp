// The argument checks every backend shares (the Ops methods, backend/ops.cpp), through the CPU
// ops: each bad call throws Error(invalid_argument) whose message names the op and the value at
// fault.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"

namespace bert {
namespace {

void expect_rejected(const std::function<void()>& call, const std::string& message) {
  try {
    call();
    FAIL() << "accepted; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(OpChecks, MessagesNameTheOpAndTheValue) {
  auto ops = make_cpu_ops(1);
  std::vector<float> buf(256);
  std::vector<int32_t> ids(16, 0);
  float* f = buf.data();
  DropoutSite certain;
  certain.p = 1.0f;
  certain.tensor_id = 7;
  AttentionLayout layout;
  layout.seq_start = {0, 4};

  expect_rejected([&] { ops->activation_fwd(f, f, -1, Activation::gelu_erf); }, "activation_fwd: bad element count -1");
  expect_rejected([&] { ops->scale(f, 2.0f, -3); }, "scale: bad element count -3");
  expect_rejected([&] { ops->dropout_residual_fwd(f, f, nullptr, 4, certain); },
                  "dropout_residual_fwd: dropout probability 1 (tensor id 7) is outside [0, 1)");
  expect_rejected([&] { ops->gather_rows(f, f, ids.data(), 2, 0); }, "gather_rows: bad shape rows=2 H=0");
  expect_rejected([&] { ops->attention_bwd(f, f, f, f, layout, 0, 4, DropoutSite{}); }, "attention_bwd: bad heads=0");
  expect_rejected([&] { ops->attention_fwd(f, f, f, f, layout, 1, 4, certain); },
                  "attention_fwd: dropout probability 1");
  expect_rejected([&] { ops->residual_layernorm_fwd(f, f, f, f, f, f, f, f, 2, 4, -1.0f, DropoutSite{}); },
                  "residual_layernorm_fwd: eps -1 is negative");
  expect_rejected([&] { ops->residual_layernorm_fwd(f, f, f, f, f, f, f, f, 2, 4, 1e-5f, certain); },
                  "residual_layernorm_fwd: dropout probability 1 (tensor id 7)");
  expect_rejected([&] { ops->residual_layernorm_bwd(f, f, f, f, f, f, f, f, f, 2, 0, DropoutSite{}); },
                  "residual_layernorm_bwd: bad shape rows=2 H=0");
  expect_rejected([&] { ops->residual_layernorm_bwd(f + 8, f, f, f, f + 8, f, f, f, f, 2, 4, DropoutSite{}); },
                  "residual_layernorm_bwd: d_in may not alias d_residual or dout");
  double sum = 0.0;
  expect_rejected([&] { ops->segment_sumsq(&sum, f, {{0, -3, 0.0f}}); },
                  "segment_sumsq: segment 0 has offset 0 and size -3");
  expect_rejected([&] { ops->adam_direction(f, f, f, f, f, {{0, 4, 0.0f}, {-1, 2, 0.0f}}, AdamStepArgs{}); },
                  "adam_direction: segment 1 has offset -1 and size 2");
  layout.seq_start = {2, 4};
  expect_rejected([&] { ops->attention_fwd(f, f, f, f, layout, 1, 4, DropoutSite{}); },
                  "attention_fwd: layout needs seq_start = {0, ...}");
}

}  // namespace
}  // namespace bert
