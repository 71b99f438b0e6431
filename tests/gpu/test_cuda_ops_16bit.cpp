// CudaOps with 16-bit activations (CudaOptions::activations_16bit, bf16 and fp16) against the CPU
// reference's fp32 ops: the dense layers (every activation, forward and backward) and attention
// (padded, packed, and padded with more sequences than heads: the per-head batched path), on a
// GPU or emulated (emulated_cuda_ops_16bit). Inputs, weights and biases hold values exact in the
// 16-bit type, so both sides start from the same numbers; the GPU then rounds every stored
// activation (attention also its raw scores before the softmax). All outputs (activations and
// the fp32 weight and bias gradients) are compared with the tolerances of the fp32-activation
// bf16/fp16 GEMM tests of test_cuda_ops.cpp (kGemmBf16: 3e-2 rel + 1.5e-1 abs; kGemmFp16: 4e-3 + 2e-2). Worst errors
// measured (emulated, printed by the test): bf16 0.016 (outputs, din), 0.040 (dW, fp32 sums of
// 45 rounded rows), attention 0.016; fp16 0.0019, 0.0047, 0.0015. A view of the wrong type is
// refused with Error(internal).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/ops.h"
#include "core/half.h"
#include "gpu_random.h"
#include "../expect_error.h"

namespace bert {
namespace {

using testing::expect_error;

using testing::randn;

struct Tolerance {
  double rtol, atol;
};

class CudaOps16 : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    CudaOptions options;
    options.precision = parse_precision(GetParam());
    options.activations_16bit = true;
    gpu = make_cuda_ops(0, options);
    type = gpu->activation_type();
  }
  bool bf16() const { return type == DType::bf16; }
  // The tolerances of test_cuda_ops.cpp's 16-bit-input GEMMs.
  Tolerance gemm_tolerance() const { return bf16() ? Tolerance{3e-2, 1.5e-1} : Tolerance{4e-3, 2e-2}; }
  uint16_t bits(float x) const { return bf16() ? float_to_bf16_bits(x) : float_to_fp16_bits(x); }
  float value(uint16_t b) const { return bf16() ? bf16_bits_to_float(b) : fp16_bits_to_float(b); }
  std::vector<float> exact(std::vector<float> x) const {
    for (float& v : x) v = value(bits(v));
    return x;
  }

  // The same values on both backends: fp32 on the CPU, the 16-bit type on the GPU.
  struct Pair {
    float* c;
    Act g;
  };
  Pair pair(const std::vector<float>& host) {
    float* c = static_cast<float*>(cpu->alloc(host.size() * 4));
    cpu->upload(c, host.data(), host.size() * 4);
    std::vector<uint16_t> b(host.size());
    for (size_t i = 0; i < host.size(); ++i) b[i] = bits(host[i]);
    void* g = gpu->alloc(b.size() * 2);
    gpu->upload(g, b.data(), b.size() * 2);
    held.push_back({c, g});
    return Pair{c, Act(g, type)};
  }
  // fp32 on both backends (weights, biases, their gradients, key_bias).
  struct Pair32 {
    float *c, *g;
  };
  Pair32 pair32(const std::vector<float>& host) {
    float* c = static_cast<float*>(cpu->alloc(host.size() * 4));
    float* g = static_cast<float*>(gpu->alloc(host.size() * 4));
    cpu->upload(c, host.data(), host.size() * 4);
    gpu->upload(g, host.data(), host.size() * 4);
    held.push_back({c, g});
    return Pair32{c, g};
  }
  void TearDown() override {
    for (auto& [c, g] : held) {
      cpu->release(c);
      gpu->release(g);
    }
  }
  // Named by the backend that holds the data: an fp32 buffer on the GPU read through the CPU
  // backend works on the emulated device (host memory) but is a segfault on a real one.
  std::vector<float> cpu_values(const float* c, size_t n) { return fp32_values(*cpu, c, n); }
  std::vector<float> gpu_values(const float* g, size_t n) { return fp32_values(*gpu, g, n); }
  std::vector<float> gpu_values(Act g, size_t n) {
    std::vector<uint16_t> b(n);
    gpu->download(b.data(), g.data, n * 2);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = value(b[i]);
    return v;
  }
  static std::vector<float> fp32_values(Ops& ops, const float* p, size_t n) {
    std::vector<float> v(n);
    ops.download(v.data(), p, n * 4);
    return v;
  }
  // Every element within atol + rtol·|cpu|; prints the worst error.
  void expect_close(const std::vector<float>& g, const std::vector<float>& c, Tolerance tol, const std::string& what) {
    ASSERT_EQ(g.size(), c.size());
    double worst = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double err = std::fabs(double(g[i]) - c[i]);
      worst = std::fmax(worst, err);
      if (!(err <= tol.atol + tol.rtol * std::fabs(c[i]))) ++bad;
    }
    std::printf("%s %s: worst |error| %.3g\n", GetParam(), what.c_str(), worst);
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements outside the tolerance (worst " << worst << ")";
  }

  std::unique_ptr<Ops> cpu = make_cpu_ops(1);
  std::unique_ptr<Ops> gpu;
  DType type = DType::f32;
  std::vector<std::pair<float*, void*>> held;
};

TEST_P(CudaOps16, DenseLayersForwardAndBackward) {
  const int64_t M = 45;
  const int K = 64, N = 48;
  const Tolerance tol = gemm_tolerance();
  for (Activation act : {Activation::none, Activation::gelu_erf, Activation::gelu_tanh, Activation::tanh}) {
    const std::string name = "activation " + std::to_string(static_cast<int>(act));
    const auto in = pair(exact(randn(M * K, 1)));
    const auto dout = pair(exact(randn(M * N, 2)));
    const auto W = pair32(exact(randn(N * K, 3, 0.2f))), b = pair32(exact(randn(N, 4, 0.5f)));
    const auto dW = pair32(std::vector<float>(N * K)), db = pair32(std::vector<float>(N));
    const auto out = pair(std::vector<float>(M * N)), pre = pair(std::vector<float>(M * N));
    const auto scratch = pair(std::vector<float>(M * N)), din = pair(std::vector<float>(M * K));
    const bool with_pre = act != Activation::none;
    cpu->linear_fwd({out.c, with_pre ? pre.c : nullptr, in.c, W.c, b.c, M, K, N, act});
    gpu->linear_fwd({out.g, with_pre ? pre.g : Act(), in.g, W.g, b.g, M, K, N, act});
    expect_close(gpu_values(out.g, M * N), cpu_values(out.c, M * N), tol, name + " linear_fwd out");
    cpu->linear_bwd({din.c, dW.c, db.c, dout.c, in.c, W.c, with_pre ? pre.c : nullptr, with_pre ? scratch.c : nullptr,
                     M, K, N, act, false});
    gpu->linear_bwd({din.g, dW.g, db.g, dout.g, in.g, W.g, with_pre ? ConstAct(pre.g) : ConstAct(),
                     with_pre ? scratch.g : Act(), M, K, N, act, false});
    expect_close(gpu_values(din.g, M * K), cpu_values(din.c, M * K), tol, name + " linear_bwd din");
    expect_close(gpu_values(dW.g, N * K), cpu_values(dW.c, N * K), tol, name + " linear_bwd dW (fp32)");
    expect_close(gpu_values(db.g, N), cpu_values(db.c, N), tol, name + " linear_bwd db (fp32)");
  }
}

TEST_P(CudaOps16, AttentionPaddedPackedAndPerHead) {
  const int heads = 4, D = 16, H = heads * D;
  AttentionLayout padded, packed, many;
  padded.seq_start = {0, 24, 48};
  packed.seq_start = {0, 7, 30, 41};
  many.seq_start = {0, 12, 24, 36, 48, 60, 72};  // more sequences than heads: GEMMs batched per head
  const Tolerance tol = gemm_tolerance();
  for (const AttentionLayout* layout : {&padded, &packed, &many}) {
    const std::string name = "layout of " + std::to_string(layout->num_seqs()) + " sequences";
    const int64_t T = layout->total_tokens(), P = layout->probs_elems(heads);
    std::vector<float> bias(T, 0.0f);
    for (int64_t t = 5; t < T; t += 9) bias[t] = -10000.0f;
    const auto key_bias = pair32(bias);
    const auto qkv = pair(exact(randn(T * 3 * H, 5)));
    const auto dctx = pair(exact(randn(T * H, 6)));
    const auto ctx = pair(std::vector<float>(T * H)), probs = pair(std::vector<float>(P));
    const auto dqkv = pair(std::vector<float>(T * 3 * H));
    const DropoutSite site{7, 1, 3, 0.1f};
    cpu->attention_fwd({ctx.c, probs.c, qkv.c, key_bias.c, *layout, heads, D, site});
    gpu->attention_fwd({ctx.g, probs.g, qkv.g, key_bias.g, *layout, heads, D, site});
    expect_close(gpu_values(probs.g, P), cpu_values(probs.c, P), tol, name + " probs");
    expect_close(gpu_values(ctx.g, T * H), cpu_values(ctx.c, T * H), tol, name + " ctx");
    cpu->attention_bwd({dqkv.c, dctx.c, ctx.c, qkv.c, probs.c, *layout, heads, D, site});
    gpu->attention_bwd({dqkv.g, dctx.g, ctx.g, qkv.g, probs.g, *layout, heads, D, site});
    expect_close(gpu_values(dqkv.g, T * 3 * H), cpu_values(dqkv.c, T * 3 * H), tol, name + " dqkv");
  }
}

TEST_P(CudaOps16, RefusesFp32ActivationsAndBadOptions) {
  std::vector<float> host(64, 1.0f);
  auto* f = static_cast<float*>(gpu->alloc(256));
  expect_error([&] { gpu->activation_fwd({f, f, 64, Activation::tanh}); }, Code::internal,
               {"activation_fwd: out is fp32 but this backend stores activations in " +
                std::string(bf16() ? "bf16" : "fp16")});
  gpu->release(f);
  CudaOptions tf32;
  tf32.activations_16bit = true;
  expect_error([&] { make_cuda_ops(0, tf32); }, Code::invalid_argument,
               {"16-bit activations need precision \"bf16\" or \"fp16\", not \"tf32\""});
  EXPECT_EQ(gpu->name(), std::string("cuda:0:") + GetParam() + ":16-bit-activations");
}

INSTANTIATE_TEST_SUITE_P(Precision, CudaOps16, ::testing::Values("bf16", "fp16"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace bert
