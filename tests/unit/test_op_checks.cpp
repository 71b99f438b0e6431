// The argument checks every backend shares (the Ops methods, backend/ops.cpp), through the CPU
// ops: each bad call throws Error(invalid_argument) whose message names the op and the value at
// fault; an activation of the wrong storage type, Error(internal).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"

namespace bert {
namespace {

void expect_rejected(const std::function<void()>& call, const std::string& message,
                     Code code = Code::invalid_argument) {
  try {
    call();
    FAIL() << "accepted; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code);
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

  expect_rejected([&] { ops->activation_fwd({f, f, -1, Activation::gelu_erf}); }, "activation_fwd: bad element count -1");
  expect_rejected([&] { ops->scale(f, 2.0f, -3); }, "scale: bad element count -3");
  expect_rejected([&] { ops->dropout_residual_fwd({f, f, nullptr, 4, certain}); },
                  "dropout_residual_fwd: dropout probability 1 (tensor id 7) is outside [0, 1)");
  expect_rejected([&] { ops->gather_rows({f, f, ids.data(), 2, 0}); }, "gather_rows: bad shape rows=2 H=0");
  expect_rejected([&] { ops->attention_bwd({f, f, f, f, f, layout, 0, 4, DropoutSite{}}); }, "attention_bwd: bad heads=0");
  expect_rejected([&] { ops->attention_fwd({f, f, f, f, layout, 1, 4, certain}); },
                  "attention_fwd: dropout probability 1");
  expect_rejected([&] { ops->layernorm_fwd({f, f, f, f, f, f, 2, 4, -1.0f}); }, "layernorm_fwd: eps -1 is negative");
  expect_rejected([&] { ops->linear_fwd({f, Act(), f, f, f, 2, 4, 4, Activation::gelu_erf}); },
                  "linear_fwd: an activation needs a pre_act buffer");
  expect_rejected([&] { ops->apply_update({f, f, {{0, 4, 0.0f}}, {1.0f, 2.0f}}); }, "apply_update: 2 scales for 1 segments");
  expect_rejected([&] { ops->residual_layernorm_fwd({f, f, f, f, f, f, f, f, 2, 4, -1.0f, DropoutSite{}}); },
                  "residual_layernorm_fwd: eps -1 is negative");
  expect_rejected([&] { ops->residual_layernorm_fwd({f, f, f, f, f, f, f, f, 2, 4, 1e-5f, certain}); },
                  "residual_layernorm_fwd: dropout probability 1 (tensor id 7)");
  expect_rejected([&] { ops->residual_layernorm_bwd({f, f, f, f, f, f, f, f, f, 2, 0, DropoutSite{}}); },
                  "residual_layernorm_bwd: bad shape rows=2 H=0");
  expect_rejected([&] { ops->residual_layernorm_bwd({f + 8, f, f, f, f + 8, f, f, f, f, 2, 4, DropoutSite{}}); },
                  "residual_layernorm_bwd: d_in may not alias d_residual or dout");
  double sum = 0.0;
  expect_rejected([&] { ops->segment_sumsq({&sum, f, {{0, -3, 0.0f}}}); },
                  "segment_sumsq: segment 0 has offset 0 and size -3");
  expect_rejected([&] { ops->adam_direction({f, f, f, f, f, {{0, 4, 0.0f}, {-1, 2, 0.0f}}, AdamStepArgs{}}); },
                  "adam_direction: segment 1 has offset -1 and size 2");
  expect_rejected([&] { ops->optimizer_step({f, f, f, f, f, {{0, 4, 0.0f}}, TrustRatio::decayed, nullptr}); },
                  "optimizer_step: no state");
  OptimizerStepState state;
  expect_rejected([&] { ops->optimizer_step({f, f, f, f, f, {{0, -4, 0.0f}}, TrustRatio::decayed, &state}); },
                  "optimizer_step: segment 0 has offset 0 and size -4");
  layout.seq_start = {2, 4};
  expect_rejected([&] { ops->attention_fwd({f, f, f, f, layout, 1, 4, DropoutSite{}}); },
                  "attention_fwd: layout needs seq_start = {0, ...}");
}

// An activation view of another storage type than the backend's is an engine bug: Error(internal)
// naming the op, the parameter and both types, before any arithmetic.
TEST(OpChecks, ActivationTypesMustBeTheBackends) {
  auto ops = make_cpu_ops(1);
  ASSERT_EQ(ops->activation_type(), DType::f32);
  std::vector<float> buf(256);
  float* f = buf.data();
  const Act bf16(f, DType::bf16);
  expect_rejected([&] { ops->activation_fwd({f, bf16, 4, Activation::gelu_erf}); },
                  "activation_fwd: pre is bf16 but this backend stores activations in fp32", Code::internal);
  expect_rejected([&] { ops->linear_fwd({f, Act(f, DType::f16), f, f, nullptr, 2, 4, 4, Activation::gelu_erf}); },
                  "linear_fwd: pre_act is fp16 but this backend stores activations in fp32", Code::internal);
  expect_rejected([&] { ops->dropout_bwd({bf16, f, 4, DropoutSite{}}); },
                  "dropout_bwd: din is bf16 but this backend stores activations in fp32", Code::internal);
  EXPECT_EQ(buf[0], 0.0f);  // nothing ran
  // Null views of any type pass (an optional argument left out).
  EXPECT_NO_THROW(ops->dropout_residual_fwd({f, f, ConstAct(nullptr, DType::bf16), 4, DropoutSite{}}));
}

}  // namespace
}  // namespace bert
