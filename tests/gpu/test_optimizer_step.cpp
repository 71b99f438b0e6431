// The optimizer step with its scalars in backend memory (Ops::optimizer_step, run through
// Optimizer::step_recorded: directly, then recorded as a CUDA graph and replayed) against the
// step driven from the host (Optimizer::step), on the CUDA backend and on the CPU's: LAMB, NVLAMB
// and AdamW over a small BERT's tensors, five steps with clipping in force, one of them with a
// non-finite gradient (skipped: moments and weights kept, the step count too). Weights, both
// moments and the gradient norms must be equal bit for bit. On a GPU (in gpu_cuda_graphs) and
// under the emulation (emulated_optimizer_step).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "gpu_random.h"
#include "model/param_table.h"
#include "optim/optimizer.h"

namespace bert {
namespace {

using testing::randn;

BertConfig small_bert() {
  BertConfig c;
  c.vocab_size = 100;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 64;
  c.max_position_embeddings = 16;
  return c;
}

std::vector<float> read(Ops& ops, const float* p, int64_t n) {
  std::vector<float> out(n);
  ops.download(out.data(), p, n * sizeof(float));
  return out;
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  size_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return count;
}

void expect_device_step_equals_host_step(Ops& ops, const std::string& name, bool nvlamb) {
  SCOPED_TRACE(ops.name() + " " + name + (nvlamb ? " (nvlamb)" : ""));
  const ParamTable table(small_bert());
  const int64_t n = table.total_elems;
  OptimizerConfig config;
  config.kind = parse_optimizer_kind(name);
  config.nvlamb = nvlamb;
  config.max_grad_norm = 0.5;  // the gradients below have norms of about 2: clipped
  Optimizer host(config, table, ops), device(config, table, ops);
  float* buffers[4];
  for (float*& b : buffers) b = static_cast<float*>(ops.alloc(n * sizeof(float)));
  float *host_params = buffers[0], *device_params = buffers[1], *host_grads = buffers[2], *device_grads = buffers[3];
  const std::vector<float> params = randn(n, 1, 0.05f);
  ops.upload(host_params, params.data(), n * sizeof(float));
  ops.upload(device_params, params.data(), n * sizeof(float));
  std::vector<RecordedRun> runs;
  for (int step = 0; step < 5; ++step) {
    std::vector<float> grads = randn(n, 10 + step, 1.0f / std::sqrt(static_cast<float>(n)) * 2);
    if (step == 2) grads[n / 2] = std::numeric_limits<float>::infinity();
    ops.upload(host_grads, grads.data(), n * sizeof(float));
    ops.upload(device_grads, grads.data(), n * sizeof(float));
    const double lr = 1e-3 * (step + 1), grad_scale = 0.5;
    const OptimizerResult h = host.step(host_params, host_grads, lr, grad_scale);
    const OptimizerResult d = device.step_recorded(device_params, device_grads, lr, grad_scale);
    runs.push_back(d.run);
    EXPECT_EQ(d.skipped, step == 2) << "step " << step;
    EXPECT_EQ(h.skipped, d.skipped) << "step " << step;
    if (!h.skipped) {
      EXPECT_EQ(std::memcmp(&h.grad_norm, &d.grad_norm, sizeof(double)), 0)
          << "step " << step << ": " << h.grad_norm << " vs " << d.grad_norm;
      EXPECT_GT(h.grad_norm, config.max_grad_norm) << "clipping should be in force";
    } else {
      EXPECT_FALSE(std::isfinite(d.grad_norm));
    }
    EXPECT_EQ(differing(read(ops, host_params, n), read(ops, device_params, n)), 0u) << "weights after step " << step;
    EXPECT_EQ(differing(read(ops, host.slot("exp_avg"), n), read(ops, device.slot("exp_avg"), n)), 0u) << "m after step " << step;
    EXPECT_EQ(differing(read(ops, host.slot("exp_avg_sq"), n), read(ops, device.slot("exp_avg_sq"), n)), 0u)
        << "v after step " << step;
  }
  EXPECT_EQ(host.steps_taken(), 4);
  EXPECT_EQ(device.steps_taken(), 4);
  EXPECT_NE(differing(params, read(ops, device_params, n)), 0u) << "the steps changed nothing";
  EXPECT_EQ(runs[0], RecordedRun::direct);
  if (ops.name() != "cpu") {  // the CPU computes as it is called: every step runs directly
    EXPECT_EQ(runs[1], RecordedRun::recorded);
    for (int step = 2; step < 5; ++step) EXPECT_EQ(runs[step], RecordedRun::replayed) << "step " << step;
  }
  for (float* b : buffers) ops.release(b);
}

class OptimizerStep : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Ops> make() const {
    return GetParam() == "cuda" ? make_cuda_ops(0, CudaOptions{Precision::bf16}) : make_cpu_ops(1);
  }
};

TEST_P(OptimizerStep, LambOnTheDeviceEqualsTheHostDrivenStep) {
  auto ops = make();
  expect_device_step_equals_host_step(*ops, "lamb", false);
}

TEST_P(OptimizerStep, NvlambOnTheDeviceEqualsTheHostDrivenStep) {
  auto ops = make();
  expect_device_step_equals_host_step(*ops, "lamb", true);
}

TEST_P(OptimizerStep, AdamwOnTheDeviceEqualsTheHostDrivenStep) {
  auto ops = make();
  expect_device_step_equals_host_step(*ops, "adamw", false);
}

INSTANTIATE_TEST_SUITE_P(Backends, OptimizerStep, ::testing::Values("cuda", "cpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace bert
