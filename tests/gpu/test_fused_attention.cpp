// cuDNN fused attention (CudaOptions::fused_attention) against the CPU reference, dropout off,
// on a padded batch (key_bias masks each sequence's tail) and a variable-length (packed) one:
// ctx on every non-padding query row and the whole dqkv. dctx is zero on padded query rows, as
// in the model (nothing reads those rows), so the reference's dqkv is zero there too.
// Tolerances: Q, K, V, O and dO are rounded to the I/O type (relative 2^-9 for bf16, 2^-12 for
// fp16) and flash attention feeds P to the P·V product in that type, so with head_dim 64 and
// |ctx| ~ 0.5 the errors are a few such roundings: bf16 2e-2 abs + 2e-2 rel on ctx and 4e-2 +
// 4e-2 on dqkv (|dqkv| ~ 1); fp16 4e-3 + 4e-3 and 8e-3 + 8e-3. Skips where the build has no
// cudnn-frontend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/ops.h"
#include "gpu_random.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kHeads = 2, kHeadDim = 64, kH = kHeads * kHeadDim;

using testing::randn;

// A host vector's copy in one backend's memory.
struct Buffer {
  Buffer(Ops& ops, const std::vector<float>& host) : ops(ops), n(host.size()) {
    ptr = static_cast<float*>(ops.alloc(n * sizeof(float)));
    ops.upload(ptr, host.data(), n * sizeof(float));
  }
  Buffer(Ops& ops, size_t n) : Buffer(ops, std::vector<float>(n)) {}
  ~Buffer() { ops.release(ptr); }
  std::vector<float> values() const {
    std::vector<float> v(n);
    ops.download(v.data(), ptr, n * sizeof(float));
    return v;
  }
  Ops& ops;
  size_t n;
  float* ptr;
};

struct Tolerance {
  double atol, rtol;
};

// Compares rows [T, width] where row_used[t]; reports the first bad element and the max error.
void expect_rows_close(const std::vector<float>& want, const std::vector<float>& got, int width,
                       const std::vector<bool>& row_used, Tolerance tol, const std::string& what) {
  size_t bad = 0, first = 0;
  double max_err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!row_used[i / width]) continue;
    const double err = std::fabs(static_cast<double>(want[i]) - got[i]);
    max_err = std::max(max_err, err);
    if (!(err <= tol.atol + tol.rtol * std::fabs(want[i])) && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements off; first at " << first << " (want "
                     << want[first] << ", got " << got[first] << "), max abs error " << max_err;
  std::printf("[ info ] %s: max abs error %.3g\n", what.c_str(), max_err);
}

struct Case {
  std::string name;
  AttentionLayout layout;
  std::vector<int> valid;  // valid (unmasked) leading tokens per sequence
};

std::vector<Case> cases() {
  Case padded{"padded", {}, {64, 40, 17}};
  padded.layout.seq_start = {0, 64, 128, 192};
  Case packed{"variable-length", {}, {50, 3, 67, 128}};
  packed.layout.seq_start = {0, 50, 53, 120, 248};
  return {padded, packed};
}

void compare(const Case& c, Ops& cpu, Ops& gpu, Tolerance ctx_tol, Tolerance grad_tol,
             const std::string& dtype) {
  const AttentionLayout& layout = c.layout;
  const int64_t T = layout.total_tokens();
  std::vector<float> bias(T, 0.0f);
  std::vector<bool> valid(T, false);
  for (int b = 0; b < layout.num_seqs(); ++b)
    for (int t = layout.seq_start[b]; t < layout.seq_start[b + 1]; ++t) {
      valid[t] = t - layout.seq_start[b] < c.valid[b];
      if (!valid[t]) bias[t] = -10000.0f;
    }
  std::vector<float> dctx_host = randn(T * kH, 12, 1.0f);
  for (int64_t t = 0; t < T; ++t)
    if (!valid[t]) std::fill_n(dctx_host.begin() + t * kH, kH, 0.0f);
  const std::vector<float> qkv_host = randn(T * 3 * kH, 11, 0.7f);
  const size_t probs = static_cast<size_t>(layout.probs_elems(kHeads));
  std::vector<float> ctx[2], dqkv[2];
  Ops* backends[2] = {&cpu, &gpu};
  for (int i = 0; i < 2; ++i) {
    Ops& ops = *backends[i];
    Buffer qkv(ops, qkv_host), key_bias(ops, bias), dctx(ops, dctx_host);
    Buffer out(ops, T * kH), p(ops, probs), grad(ops, randn(T * 3 * kH, 13, 1.0f));
    ops.attention_fwd(out.ptr, p.ptr, qkv.ptr, key_bias.ptr, layout, kHeads, kHeadDim,
                      DropoutSite{});
    ops.attention_bwd(grad.ptr, dctx.ptr, qkv.ptr, p.ptr, layout, kHeads, kHeadDim,
                      DropoutSite{});
    ctx[i] = out.values();
    dqkv[i] = grad.values();
  }
  const std::string label = dtype + " " + c.name;
  expect_rows_close(ctx[0], ctx[1], kH, valid, ctx_tol, label + " ctx");
  expect_rows_close(dqkv[0], dqkv[1], 3 * kH, std::vector<bool>(T, true), grad_tol,
                    label + " dqkv");
}

class FusedAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fused_attention_built()) GTEST_SKIP() << "built without cudnn-frontend";
    cpu = make_cpu_ops(2);
  }
  std::unique_ptr<Ops> cpu;
};

TEST_F(FusedAttention, Bf16MatchesTheReferencePaddedAndVariableLength) {
  auto gpu = make_cuda_ops(0, CudaOptions{"bf16", true});
  for (const Case& c : cases()) compare(c, *cpu, *gpu, {2e-2, 2e-2}, {4e-2, 4e-2}, "bf16");
}

TEST_F(FusedAttention, Fp16MatchesTheReferencePaddedAndVariableLength) {
  auto gpu = make_cuda_ops(0, CudaOptions{"fp16", true});
  for (const Case& c : cases()) compare(c, *cpu, *gpu, {4e-3, 4e-3}, {8e-3, 8e-3}, "fp16");
}

TEST_F(FusedAttention, DropoutIsRepeatablePerSiteAndBackwardNeedsItsForward) {
  auto gpu = make_cuda_ops(0, CudaOptions{"bf16", true});
  const Case c = cases()[0];
  const int64_t T = c.layout.total_tokens();
  Buffer qkv(*gpu, randn(T * 3 * kH, 21, 0.7f)), key_bias(*gpu, T), out(*gpu, T * kH);
  Buffer p(*gpu, c.layout.probs_elems(kHeads)), never_used(*gpu, c.layout.probs_elems(kHeads));
  auto run = [&](uint64_t step) {
    gpu->attention_fwd(out.ptr, p.ptr, qkv.ptr, key_bias.ptr, c.layout, kHeads, kHeadDim,
                       DropoutSite{5, step, 9, 0.1f});
    return out.values();
  };
  const std::vector<float> a = run(1), b = run(1), other = run(2);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << "the same dropout site must give the same mask";
  EXPECT_NE(a, other) << "another step must draw another mask";
  Buffer dctx(*gpu, randn(T * kH, 22, 1.0f)), dqkv(*gpu, T * 3 * kH);
  gpu->attention_bwd(dqkv.ptr, dctx.ptr, qkv.ptr, p.ptr, c.layout, kHeads, kHeadDim,
                     DropoutSite{5, 2, 9, 0.1f});
  for (float g : dqkv.values()) ASSERT_TRUE(std::isfinite(g));
  try {
    gpu->attention_bwd(dqkv.ptr, dctx.ptr, qkv.ptr, never_used.ptr, c.layout, kHeads, kHeadDim,
                       DropoutSite{});
    FAIL() << "a backward without its forward must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("no forward output"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bert
