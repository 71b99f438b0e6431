// cuDNN fused attention (CudaOptions::fused_attention) against the CPU reference, dropout off,
// on a padded batch (key_bias masks each sequence's tail) and variable-length (packed) ones:
// ctx on every non-padding query row and the whole dqkv. dctx is zero on padded query rows, as
// in the model (nothing reads those rows), so the reference's dqkv is zero there too.
// Variable-length batches run through cuDNN's ragged graphs on Hopper and through padded copies
// elsewhere; CudaOptions::fused_attention_pad_varlen forces the padded copies, so on an H100
// both paths are checked, on layouts with sequences of 1 token, lengths on both sides of the
// 64-token padding quantum and masked tails inside packed sequences.
// Tolerances: Q, K, V, O and dO are rounded to the I/O type (relative 2^-9 for bf16, 2^-12 for
// fp16) and flash attention feeds P to the P·V product in that type, so with head_dim 64 and
// |ctx| ~ 0.5 the errors are a few such roundings: bf16 2e-2 abs + 2e-2 rel on ctx and 4e-2 +
// 4e-2 on dqkv (|dqkv| ~ 1); fp16 4e-3 + 4e-3 and 8e-3 + 8e-3.
// With dropout (cuDNN's own masks, so no reference to compare with): the same site repeats its
// mask, another step draws another, and the backward uses the forward's mask, checked per
// (sequence, head) by the identity <ctx, dctx> = <V, dV> (both are sum_ij dropout(P)_ij V_j·dctx_i).
// Its tolerance, 3e-2 of the two sides' root-sum-square of terms, comes from a PyTorch
// simulation of bf16 rounding (P, O and dV rounded; these layouts): worst 4.5e-3 with the
// forward's mask; with an independent mask at least 3 blocks beyond 3e-2 in every one of 20
// draws. The check itself is tested on the CPU backend (same mask passes, another step fails).
// With 16-bit activations (CudaOptions::activations_16bit) cuDNN reads qkv and dctx and writes
// ctx and dqkv in their own storage: given the same 16-bit inputs, the results are those of the
// fp32-activation path bit for bit (that path casts the same values to and from the same 16-bit
// tensors), on every layout and variable-length path.
// Skips where the build has no cudnn-frontend.
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
#include "../expect_error.h"
#include "core/error.h"
#include "core/half.h"

namespace bert {
namespace {

using testing::expect_error;

// The fused attention as these tests want it: cuDNN's deterministic backward or an error, never a
// silent fallback to the atomics-based one (the bitwise checks would fail looking like graph bugs).
std::unique_ptr<Ops> fused_ops(const std::string& precision, bool pad_varlen = false, bool activations_16bit = false) {
  CudaOptions options{parse_precision(precision), true, pad_varlen, activations_16bit};
  options.fused_attention_deterministic_only = true;
  return make_cuda_ops(0, options);
}

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

// A packed (variable-length) layout of these sequence lengths; valid defaults to the lengths.
Case packed_case(std::string name, const std::vector<int>& lengths, std::vector<int> valid = {}) {
  Case c{std::move(name), {}, valid.empty() ? lengths : std::move(valid)};
  c.layout.seq_start = {0};
  for (int len : lengths) c.layout.seq_start.push_back(c.layout.seq_start.back() + len);
  return c;
}

std::vector<Case> cases() {
  Case padded{"padded", {}, {64, 40, 17}};
  padded.layout.seq_start = {0, 64, 128, 192};
  return {padded, packed_case("variable-length", {50, 3, 67, 128})};
}

// Variable-length layouts: lengths 1, 63, 64, 65 and 127 around the 64-token quantum that the
// padded copies round the longest sequence up to, a batch inside one quantum, masked tails.
std::vector<Case> varlen_cases() {
  return {packed_case("variable-length", {50, 3, 67, 128}),
          packed_case("lengths 1..127", {1, 64, 65, 127, 2}),
          packed_case("one quantum", {1, 33, 5, 63, 20, 64, 1, 9}),
          packed_case("masked tails", {70, 20, 100}, {60, 20, 1})};
}

// key_bias (-10000 on masked keys) and which tokens are valid, for a case.
void masks(const Case& c, std::vector<float>& bias, std::vector<bool>& valid) {
  const AttentionLayout& layout = c.layout;
  bias.assign(layout.total_tokens(), 0.0f);
  valid.assign(layout.total_tokens(), false);
  for (int b = 0; b < layout.num_seqs(); ++b)
    for (int t = layout.seq_start[b]; t < layout.seq_start[b + 1]; ++t) {
      valid[t] = t - layout.seq_start[b] < c.valid[b];
      if (!valid[t]) bias[t] = -10000.0f;
    }
}

// dctx [T, H] of the given seed, zero on padded query rows (as in the model).
std::vector<float> grad_output(const Case& c, uint32_t seed) {
  std::vector<float> bias;
  std::vector<bool> valid;
  masks(c, bias, valid);
  std::vector<float> dctx = randn(valid.size() * kH, seed, 1.0f);
  for (size_t t = 0; t < valid.size(); ++t)
    if (!valid[t]) std::fill_n(dctx.begin() + t * kH, kH, 0.0f);
  return dctx;
}

// One forward (site fwd) and backward (site bwd) on `ops`: ctx and dqkv.
void run_attention(Ops& ops, const Case& c, const std::vector<float>& qkv_host,
                   const std::vector<float>& dctx_host, const DropoutSite& fwd,
                   const DropoutSite& bwd, std::vector<float>& ctx, std::vector<float>& dqkv) {
  const AttentionLayout& layout = c.layout;
  const int64_t T = layout.total_tokens();
  std::vector<float> bias;
  std::vector<bool> valid;
  masks(c, bias, valid);
  Buffer qkv(ops, qkv_host), key_bias(ops, bias), dctx(ops, dctx_host);
  Buffer out(ops, T * kH), p(ops, layout.probs_elems(kHeads)), grad(ops, randn(T * 3 * kH, 13, 1.0f));
  ops.attention_fwd({out.ptr, p.ptr, qkv.ptr, key_bias.ptr, layout, kHeads, kHeadDim, fwd});
  ops.attention_bwd({grad.ptr, dctx.ptr, out.ptr, qkv.ptr, p.ptr, layout, kHeads, kHeadDim, bwd});
  ctx = out.values();
  dqkv = grad.values();
}

void compare(const Case& c, Ops& cpu, Ops& gpu, Tolerance ctx_tol, Tolerance grad_tol,
             const std::string& dtype) {
  const int64_t T = c.layout.total_tokens();
  std::vector<float> bias;
  std::vector<bool> valid;
  masks(c, bias, valid);
  const std::vector<float> dctx = grad_output(c, 12), qkv = randn(T * 3 * kH, 11, 0.7f);
  std::vector<float> ctx[2], dqkv[2];
  Ops* backends[2] = {&cpu, &gpu};
  for (int i = 0; i < 2; ++i)
    run_attention(*backends[i], c, qkv, dctx, DropoutSite{}, DropoutSite{}, ctx[i], dqkv[i]);
  const std::string label = dtype + " " + c.name;
  expect_rows_close(ctx[0], ctx[1], kH, valid, ctx_tol, label + " ctx");
  expect_rows_close(dqkv[0], dqkv[1], 3 * kH, std::vector<bool>(T, true), grad_tol,
                    label + " dqkv");
}

// (Sequence, head) blocks where <ctx, dctx> and <V, dV> differ by more than `tol` of the sum of
// the two sides' root-sum-squares of terms: blocks whose backward did not use the forward's
// dropout mask. Prints the worst relative difference.
int mask_mismatches(const Case& c, const std::vector<float>& qkv, const std::vector<float>& ctx,
                    const std::vector<float>& dctx, const std::vector<float>& dqkv, double tol,
                    const std::string& what) {
  int bad = 0;
  double worst = 0.0;
  for (int b = 0; b < c.layout.num_seqs(); ++b)
    for (int h = 0; h < kHeads; ++h) {
      double out = 0.0, in = 0.0, out_sq = 0.0, in_sq = 0.0;
      for (int t = c.layout.seq_start[b]; t < c.layout.seq_start[b + 1]; ++t)
        for (int d = h * kHeadDim; d < (h + 1) * kHeadDim; ++d) {
          const double o = static_cast<double>(ctx[t * kH + d]) * dctx[t * kH + d];
          const double v = static_cast<double>(qkv[t * 3 * kH + 2 * kH + d]) *
                           dqkv[t * 3 * kH + 2 * kH + d];
          out += o;
          in += v;
          out_sq += o * o;
          in_sq += v * v;
        }
      const double scale = std::sqrt(out_sq) + std::sqrt(in_sq);
      const double rel = scale > 0.0 ? std::fabs(out - in) / scale : 0.0;
      worst = std::max(worst, rel);
      if (rel > tol) ++bad;
    }
  std::printf("[ info ] %s: <ctx, dctx> vs <V, dV>: worst relative difference %.3g, %d blocks "
              "beyond %.3g\n", what.c_str(), worst, bad, tol);
  return bad;
}

constexpr double kMaskTolerance = 3e-2;

// The fused dropout checks on one layout: the same site repeats its mask, another step draws
// another, the backward uses the forward's mask, and a backward needs its forward.
void check_dropout(Ops& gpu, const Case& c, const std::string& label) {
  const int64_t T = c.layout.total_tokens();
  std::vector<float> bias;
  std::vector<bool> valid;
  masks(c, bias, valid);
  const std::vector<float> qkv_host = randn(T * 3 * kH, 21, 0.7f);
  Buffer qkv(gpu, qkv_host), key_bias(gpu, bias), out(gpu, T * kH);
  Buffer p(gpu, c.layout.probs_elems(kHeads)), never_used(gpu, c.layout.probs_elems(kHeads));
  auto run = [&](uint64_t step) {
    gpu.attention_fwd({out.ptr, p.ptr, qkv.ptr, key_bias.ptr, c.layout, kHeads, kHeadDim,
                       DropoutSite{5, step, 9, 0.1f}});
    return out.values();
  };
  const std::vector<float> a = run(1), b = run(1), other = run(2);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << label << ": the same dropout site must give the same mask";
  EXPECT_NE(a, other) << label << ": another step must draw another mask";
  const std::vector<float> dctx_host = grad_output(c, 22);
  Buffer dctx(gpu, dctx_host), dqkv(gpu, T * 3 * kH);
  gpu.attention_bwd({dqkv.ptr, dctx.ptr, out.ptr, qkv.ptr, p.ptr, c.layout, kHeads, kHeadDim,
                     DropoutSite{5, 2, 9, 0.1f}});
  const std::vector<float> grads = dqkv.values();
  for (float g : grads) ASSERT_TRUE(std::isfinite(g)) << label;
  EXPECT_EQ(mask_mismatches(c, qkv_host, other, dctx_host, grads, kMaskTolerance, label), 0)
      << label << ": the backward must use the forward's dropout mask";
  SCOPED_TRACE(std::string(label) + ": a backward without its forward must be refused");
  expect_error([&] { gpu.attention_bwd({dqkv.ptr, dctx.ptr, out.ptr, qkv.ptr, never_used.ptr, c.layout, kHeads, kHeadDim, DropoutSite{}}); },
               Code::invalid_argument, {"no forward output"});
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
  auto gpu = fused_ops("bf16");
  for (const Case& c : cases()) compare(c, *cpu, *gpu, {2e-2, 2e-2}, {4e-2, 4e-2}, "bf16");
}

TEST_F(FusedAttention, Fp16MatchesTheReferencePaddedAndVariableLength) {
  auto gpu = fused_ops("fp16");
  for (const Case& c : cases()) compare(c, *cpu, *gpu, {4e-3, 4e-3}, {8e-3, 8e-3}, "fp16");
}

// Both variable-length paths: this GPU's own (ragged graphs on Hopper, padded copies elsewhere)
// and the padded copies forced.
TEST_F(FusedAttention, VariableLengthLayoutsMatchTheReferenceRaggedAndPadded) {
  for (bool pad : {false, true}) {
    const std::string path = pad ? " (padded copies)" : " (this GPU's path)";
    auto bf16 = fused_ops("bf16", pad);
    auto fp16 = fused_ops("fp16", pad);
    for (const Case& c : varlen_cases()) {
      compare(c, *cpu, *bf16, {2e-2, 2e-2}, {4e-2, 4e-2}, "bf16" + path);
      compare(c, *cpu, *fp16, {4e-3, 4e-3}, {8e-3, 8e-3}, "fp16" + path);
    }
  }
}

TEST_F(FusedAttention, DropoutIsRepeatablePerSiteAndBackwardNeedsItsForward) {
  auto gpu = fused_ops("bf16");
  check_dropout(*gpu, cases()[0], "padded");
}

TEST_F(FusedAttention, DropoutOnVariableLengthLayoutsRaggedAndPadded) {
  for (bool pad : {false, true}) {
    auto gpu = fused_ops("bf16", pad);
    for (const Case& c : varlen_cases())
      check_dropout(*gpu, c, c.name + (pad ? " (padded copies)" : " (this GPU's path)"));
  }
}

// The mask check itself, on the CPU reference: its backward regenerates the forward's mask from
// the site, so the identity holds to fp32 rounding; a backward at another step uses another mask
// and must be caught.
TEST_F(FusedAttention, MaskCheckCatchesABackwardWithAnotherMask) {
  for (const Case& c : varlen_cases()) {
    const int64_t T = c.layout.total_tokens();
    const std::vector<float> qkv = randn(T * 3 * kH, 21, 0.7f), dctx = grad_output(c, 22);
    std::vector<float> ctx, dqkv;
    const DropoutSite site{5, 1, 9, 0.1f}, other{5, 2, 9, 0.1f};
    run_attention(*cpu, c, qkv, dctx, site, site, ctx, dqkv);
    EXPECT_EQ(mask_mismatches(c, qkv, ctx, dctx, dqkv, 1e-5, c.name + " cpu, same mask"), 0);
    run_attention(*cpu, c, qkv, dctx, site, other, ctx, dqkv);
    EXPECT_GE(mask_mismatches(c, qkv, ctx, dctx, dqkv, kMaskTolerance, c.name + " cpu, another mask"), 1);
  }
}

// One forward and backward (no dropout) with activations stored as `type` on the host side of
// `ops`: inputs rounded to the type first (so an fp32 run sees the same values), results widened.
void run_attention_stored(Ops& ops, const Case& c, std::vector<float> qkv_host, std::vector<float> dctx_host,
                          DType type, std::vector<float>& ctx, std::vector<float>& dqkv) {
  const AttentionLayout& layout = c.layout;
  const int64_t T = layout.total_tokens();
  auto round = [&](float x) {
    return type == DType::bf16 ? bf16_bits_to_float(float_to_bf16_bits(x)) : fp16_bits_to_float(float_to_fp16_bits(x));
  };
  for (float& x : qkv_host) x = round(x);
  for (float& x : dctx_host) x = round(x);
  if (ops.activation_type() == DType::f32) {
    run_attention(ops, c, qkv_host, dctx_host, DropoutSite{}, DropoutSite{}, ctx, dqkv);
    return;
  }
  auto to_device = [&](const std::vector<float>& host) {
    std::vector<uint16_t> bits(host.size());
    for (size_t i = 0; i < host.size(); ++i)
      bits[i] = type == DType::bf16 ? float_to_bf16_bits(host[i]) : float_to_fp16_bits(host[i]);
    void* device = ops.alloc(bits.size() * 2);
    ops.upload(device, bits.data(), bits.size() * 2);
    return device;
  };
  auto to_host = [&](const void* device, size_t n) {
    std::vector<uint16_t> bits(n);
    ops.download(bits.data(), device, n * 2);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = type == DType::bf16 ? bf16_bits_to_float(bits[i]) : fp16_bits_to_float(bits[i]);
    return out;
  };
  std::vector<float> bias;
  std::vector<bool> valid;
  masks(c, bias, valid);
  Buffer key_bias(ops, bias), stats(ops, layout.probs_elems(kHeads));
  void* qkv = to_device(qkv_host);
  void* dctx = to_device(dctx_host);
  void* out = to_device(std::vector<float>(T * kH));
  void* grad = to_device(randn(T * 3 * kH, 13, 1.0f));
  ops.attention_fwd({Act(out, type), Act(stats.ptr, type), ConstAct(qkv, type), key_bias.ptr, layout, kHeads, kHeadDim,
                     DropoutSite{}});
  ops.attention_bwd({Act(grad, type), ConstAct(dctx, type), ConstAct(out, type), ConstAct(qkv, type), ConstAct(stats.ptr, type), layout,
                     kHeads, kHeadDim, DropoutSite{}});
  ctx = to_host(out, T * kH);
  dqkv = to_host(grad, T * 3 * kH);
  for (void* p : {qkv, dctx, out, grad}) ops.release(p);
}

TEST_F(FusedAttention, SixteenBitActivationsGiveTheFp32PathsResultsBitwise) {
  for (const char* precision : {"bf16", "fp16"}) {
    const DType type = std::string(precision) == "bf16" ? DType::bf16 : DType::f16;
    for (bool pad : {false, true}) {
      auto fp32_acts = fused_ops(precision, pad);
      auto lowp_acts = fused_ops(precision, pad, true);
      ASSERT_EQ(lowp_acts->activation_type(), type);
      std::vector<Case> all = cases();
      for (const Case& c : varlen_cases()) all.push_back(c);
      for (const Case& c : all) {
        const int64_t T = c.layout.total_tokens();
        const std::vector<float> qkv = randn(T * 3 * kH, 11, 0.7f), dctx = grad_output(c, 12);
        std::vector<float> ctx[2], dqkv[2];
        run_attention_stored(*fp32_acts, c, qkv, dctx, type, ctx[0], dqkv[0]);
        run_attention_stored(*lowp_acts, c, qkv, dctx, type, ctx[1], dqkv[1]);
        const std::string label = std::string(precision) + " " + c.name + (pad ? " (padded copies)" : "");
        std::vector<bool> valid;
        std::vector<float> bias;
        masks(c, bias, valid);
        for (int64_t t = 0; t < T; ++t) {
          if (!valid[t]) continue;
          ASSERT_EQ(std::memcmp(ctx[0].data() + t * kH, ctx[1].data() + t * kH, kH * sizeof(float)), 0)
              << label << ": ctx row " << t;
        }
        EXPECT_EQ(dqkv[0], dqkv[1]) << label << ": dqkv";
      }
    }
  }
}

// A 16-bit ctx of the packed rows is where cuDNN wrote O, and the backward reads O back from it:
// a backward given another buffer as ctx is refused, naming both.
TEST_F(FusedAttention, ABackwardGivenAnotherCtxThanItsForwardsIsRefused) {
  auto gpu = fused_ops("bf16", false, true);
  const Case c = cases().front();  // a copy: cases() returns a temporary
  const int64_t T = c.layout.total_tokens();
  std::vector<float> bias;
  std::vector<bool> valid;
  masks(c, bias, valid);
  Buffer key_bias(*gpu, bias), stats(*gpu, c.layout.probs_elems(kHeads));
  const size_t row_bytes = static_cast<size_t>(kH) * 2;
  void* qkv = gpu->alloc(T * 3 * row_bytes);
  void* out = gpu->alloc(T * row_bytes);
  void* other = gpu->alloc(T * row_bytes);
  void* grad = gpu->alloc(T * 3 * row_bytes);
  for (void* p : {qkv, other}) gpu->fill_zero(p, p == qkv ? T * 3 * row_bytes : T * row_bytes);
  gpu->attention_fwd({Act(out, DType::bf16), Act(stats.ptr, DType::bf16), ConstAct(qkv, DType::bf16), key_bias.ptr,
                      c.layout, kHeads, kHeadDim, DropoutSite{}});
  expect_error([&] {
    gpu->attention_bwd({Act(grad, DType::bf16), ConstAct(other, DType::bf16), ConstAct(other, DType::bf16),
                        ConstAct(qkv, DType::bf16), ConstAct(stats.ptr, DType::bf16), c.layout, kHeads, kHeadDim,
                        DropoutSite{}});
  }, Code::invalid_argument, {"attention_bwd: ctx (", "is not the output of the forward that wrote this probs buffer"});
  gpu->attention_bwd({Act(grad, DType::bf16), ConstAct(other, DType::bf16), ConstAct(out, DType::bf16),
                      ConstAct(qkv, DType::bf16), ConstAct(stats.ptr, DType::bf16), c.layout, kHeads, kHeadDim,
                      DropoutSite{}});
  gpu->synchronize();
  for (void* p : {qkv, out, other, grad}) gpu->release(p);
}

}  // namespace
}  // namespace bert
