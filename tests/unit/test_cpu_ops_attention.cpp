// CPU attention: forward (probs and ctx) against a double-precision loop over sequences of
// different lengths with masked keys, with and without dropout (mask drawn at the index of each
// probability in the saved probs array); backward against finite differences (small case) and a
// double-precision backward (larger case); bitwise determinism across runs and thread counts.
// With bf16 GEMM inputs (CPUs with AVX512-BF16 or AMX): within bf16 rounding of the same double
// references, not equal to the fp32 results (the bf16 products ran), the same bits on 1 and 3 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "core/error.h"
#include "core/philox.h"
#include "test_cpu_ops_common.h"

namespace bert {
namespace {

using testing::expect_close;
using testing::numeric_grad;
using testing::random_floats;
using testing::weighted_sum;

struct AttnCase {
  AttentionLayout layout;
  int heads = 2, head_dim = 4;
  std::vector<float> qkv, key_bias;
  int64_t T() const { return layout.total_tokens(); }
  int64_t H() const { return static_cast<int64_t>(heads) * head_dim; }
};

// Three sequences of lengths 3, 5, 4 with one masked key in the second and third.
AttnCase small_case() {
  AttnCase c;
  c.layout.seq_start = {0, 3, 8, 12};
  c.qkv = random_floats(c.T() * 3 * c.H(), 1, -1.5f, 1.5f);
  c.key_bias.assign(c.T(), 0.0f);
  c.key_bias[6] = -10000.0f;
  c.key_bias[11] = -10000.0f;
  return c;
}

AttnCase large_case() {
  AttnCase c;
  c.layout.seq_start = {0, 37, 37 + 50};
  c.heads = 3;
  c.head_dim = 16;
  c.qkv = random_floats(c.T() * 3 * c.H(), 2, -1.0f, 1.0f);
  c.key_bias.assign(c.T(), 0.0f);
  for (int t = 30; t < 37; ++t) c.key_bias[t] = -10000.0f;
  return c;
}

DropoutSite attention_site(float p) {
  DropoutSite s;
  s.seed = 99;
  s.step = 5;
  s.tensor_id = 3;
  s.p = p;
  return s;
}

// mask·scale for probability index i (1 when p == 0).
double keep_factor(const DropoutSite& site, int64_t i) {
  if (site.p == 0.0f) return 1.0;
  const float scale = 1.0f / (1.0f - site.p);
  return philox_uniform_at(site.seed, site.step, site.tensor_id, i) >= site.p ? scale : 0.0;
}

struct Reference {
  std::vector<double> probs, ctx, dqkv;
};

// Double-precision attention forward and (when dctx is given) backward.
Reference reference_attention(const AttnCase& c, const DropoutSite& site,
                              const std::vector<float>* dctx) {
  const int64_t H = c.H(), ld = 3 * H, D = c.head_dim;
  Reference r;
  r.probs.assign(c.layout.probs_elems(c.heads), 0.0);
  r.ctx.assign(c.T() * H, 0.0);
  r.dqkv.assign(c.T() * ld, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int b = 0; b < c.layout.num_seqs(); ++b) {
    const int64_t s0 = c.layout.seq_start[b], L = c.layout.seq_start[b + 1] - s0;
    for (int h = 0; h < c.heads; ++h) {
      auto Q = [&](int64_t t, int64_t d) { return double(c.qkv[(s0 + t) * ld + h * D + d]); };
      auto K = [&](int64_t t, int64_t d) { return double(c.qkv[(s0 + t) * ld + H + h * D + d]); };
      auto V = [&](int64_t t, int64_t d) { return double(c.qkv[(s0 + t) * ld + 2 * H + h * D + d]); };
      const int64_t off = c.layout.probs_offset(b, c.heads) + h * L * L;
      std::vector<double> P(L * L), F(L * L);  // probs, keep factors
      for (int64_t q = 0; q < L; ++q) {
        double mx = -1e300;
        std::vector<double> s(L);
        for (int64_t k = 0; k < L; ++k) {
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += Q(q, d) * K(k, d);
          s[k] = dot * scale + c.key_bias[s0 + k];
          mx = std::max(mx, s[k]);
        }
        double sum = 0.0;
        for (int64_t k = 0; k < L; ++k) sum += std::exp(s[k] - mx);
        for (int64_t k = 0; k < L; ++k) {
          P[q * L + k] = std::exp(s[k] - mx) / sum;
          F[q * L + k] = keep_factor(site, off + q * L + k);
          r.probs[off + q * L + k] = P[q * L + k];
        }
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t k = 0; k < L; ++k) acc += P[q * L + k] * F[q * L + k] * V(k, d);
          r.ctx[(s0 + q) * H + h * D + d] = acc;
        }
      }
      if (dctx == nullptr) continue;
      auto G = [&](int64_t t, int64_t d) { return double((*dctx)[(s0 + t) * H + h * D + d]); };
      std::vector<double> dS(L * L);
      for (int64_t q = 0; q < L; ++q) {
        std::vector<double> dP(L);
        double dot = 0.0;
        for (int64_t k = 0; k < L; ++k) {
          double g = 0.0;
          for (int64_t d = 0; d < D; ++d) g += G(q, d) * V(k, d);
          dP[k] = g * F[q * L + k];
          dot += dP[k] * P[q * L + k];
        }
        for (int64_t k = 0; k < L; ++k) dS[q * L + k] = P[q * L + k] * (dP[k] - dot) * scale;
      }
      for (int64_t t = 0; t < L; ++t) {
        for (int64_t d = 0; d < D; ++d) {
          double dq = 0.0, dk = 0.0, dv = 0.0;
          for (int64_t u = 0; u < L; ++u) {
            dq += dS[t * L + u] * K(u, d);
            dk += dS[u * L + t] * Q(u, d);
            dv += P[u * L + t] * F[u * L + t] * G(u, d);
          }
          r.dqkv[(s0 + t) * ld + h * D + d] = dq;
          r.dqkv[(s0 + t) * ld + H + h * D + d] = dk;
          r.dqkv[(s0 + t) * ld + 2 * H + h * D + d] = dv;
        }
      }
    }
  }
  return r;
}

void run_forward(Ops& ops, const AttnCase& c, const DropoutSite& site, std::vector<float>& ctx,
                 std::vector<float>& probs) {
  ctx.assign(c.T() * c.H(), 0.0f);
  probs.assign(c.layout.probs_elems(c.heads), 0.0f);
  ops.attention_fwd({ctx.data(), probs.data(), c.qkv.data(), c.key_bias.data(), c.layout, c.heads,
                     c.head_dim, site});
}

class CpuAttention : public ::testing::TestWithParam<float> {};

TEST_P(CpuAttention, ForwardMatchesDoubleLoop) {
  const DropoutSite site = attention_site(GetParam());
  auto ops = make_cpu_ops(2);
  for (const AttnCase& c : {small_case(), large_case()}) {
    std::vector<float> ctx, probs;
    run_forward(*ops, c, site, ctx, probs);
    const Reference r = reference_attention(c, site, nullptr);
    expect_close(probs, r.probs, 1e-6, 1e-5, "probs");
    expect_close(ctx, r.ctx, 1e-5, 1e-5, "ctx");
  }
}

TEST_P(CpuAttention, MaskedKeysGetNoProbability) {
  const AttnCase c = small_case();
  auto ops = make_cpu_ops(2);
  std::vector<float> ctx, probs;
  run_forward(*ops, c, attention_site(GetParam()), ctx, probs);
  // Sequence 1 spans tokens 3..7; token 6 is its key 3.
  const int64_t L = 5, off = c.layout.probs_offset(1, c.heads);
  for (int h = 0; h < c.heads; ++h) {
    for (int64_t q = 0; q < L; ++q) {
      EXPECT_LT(probs[off + (h * L + q) * L + 3], 1e-30f) << "head " << h << " query " << q;
      double row = 0.0;
      for (int64_t k = 0; k < L; ++k) row += probs[off + (h * L + q) * L + k];
      EXPECT_NEAR(row, 1.0, 1e-6);
    }
  }
}

TEST_P(CpuAttention, BackwardMatchesFiniteDifferences) {
  const DropoutSite site = attention_site(GetParam());
  AttnCase c = small_case();
  auto ops = make_cpu_ops(2);
  const std::vector<float> R = random_floats(c.T() * c.H(), 3);
  std::vector<float> ctx, probs;
  auto f = [&]() {
    run_forward(*ops, c, site, ctx, probs);
    return weighted_sum(ctx, R);
  };
  f();
  std::vector<float> dqkv(c.qkv.size(), 55.0f);  // overwritten
  ops->attention_bwd({dqkv.data(), R.data(), ctx.data(), c.qkv.data(), probs.data(), c.layout, c.heads,
                      c.head_dim, site});
  const std::vector<double> numeric = numeric_grad(c.qkv, f, 1e-2f);
  expect_close(dqkv, numeric, 2e-3, 2e-3, "dqkv vs finite differences");
  const Reference r = reference_attention(c, site, &R);
  expect_close(dqkv, r.dqkv, 1e-5, 1e-5, "dqkv vs double reference");
}

TEST_P(CpuAttention, LargerBackwardMatchesDoubleReference) {
  const DropoutSite site = attention_site(GetParam());
  const AttnCase c = large_case();
  auto ops = make_cpu_ops(2);
  const std::vector<float> dctx = random_floats(c.T() * c.H(), 4);
  std::vector<float> ctx, probs;
  run_forward(*ops, c, site, ctx, probs);
  std::vector<float> dqkv(c.qkv.size(), 55.0f);
  ops->attention_bwd({dqkv.data(), dctx.data(), ctx.data(), c.qkv.data(), probs.data(), c.layout, c.heads,
                      c.head_dim, site});
  const Reference r = reference_attention(c, site, &dctx);
  expect_close(dqkv, r.dqkv, 2e-5, 1e-4, "dqkv");
}

TEST_P(CpuAttention, BitwiseEqualAcrossRunsAndThreadCounts) {
  const DropoutSite site = attention_site(GetParam());
  const AttnCase c = large_case();
  const std::vector<float> dctx = random_floats(c.T() * c.H(), 5);
  std::vector<float> first_ctx, first_dqkv;
  for (int threads : {2, 2, 1, 3}) {
    auto ops = make_cpu_ops(threads);
    std::vector<float> ctx, probs, dqkv(c.qkv.size());
    run_forward(*ops, c, site, ctx, probs);
    ops->attention_bwd({dqkv.data(), dctx.data(), ctx.data(), c.qkv.data(), probs.data(), c.layout, c.heads,
                        c.head_dim, site});
    if (first_ctx.empty()) {
      first_ctx = ctx;
      first_dqkv = dqkv;
      continue;
    }
    EXPECT_EQ(ctx, first_ctx) << threads << " threads";
    EXPECT_EQ(dqkv, first_dqkv) << threads << " threads";
  }
}

// max |a - b| over max |b|.
double relative_gap(const std::vector<float>& a, const std::vector<double>& b) {
  double gap = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    gap = std::max(gap, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return gap / scale;
}

TEST_P(CpuAttention, Bf16GemmInputsStayWithinRoundingOfTheDoubleReference) {
  if (!cpu_has_native_bf16()) GTEST_SKIP() << "bf16 GEMM inputs need AVX512-BF16 or AMX; oneDNN sees " << cpu_isa_name();
  const DropoutSite site = attention_site(GetParam());
  const AttnCase c = large_case();
  const std::vector<float> dctx = random_floats(c.T() * c.H(), 6);
  const Reference r = reference_attention(c, site, &dctx);
  std::vector<float> results[3][2];  // [fp32, bf16 on 1 thread, bf16 on 3][ctx, dqkv]
  const std::pair<int, bool> runs[3] = {{2, false}, {1, true}, {3, true}};
  for (int i = 0; i < 3; ++i) {
    CpuOps ops(runs[i].first, runs[i].second);
    std::vector<float> probs, &ctx = results[i][0], &dqkv = results[i][1];
    run_forward(ops, c, site, ctx, probs);
    dqkv.assign(c.qkv.size(), 55.0f);
    ops.attention_bwd({dqkv.data(), dctx.data(), ctx.data(), c.qkv.data(), probs.data(), c.layout, c.heads,
                       c.head_dim, site});
  }
  // bf16 keeps 8 bits of mantissa (2^-9 relative per operand); the sums run over at most 50 terms.
  const double ctx_gap = relative_gap(results[1][0], r.ctx), dqkv_gap = relative_gap(results[1][1], r.dqkv);
  EXPECT_LT(ctx_gap, 1e-2);
  EXPECT_LT(dqkv_gap, 2e-2);
  EXPECT_GT(ctx_gap, 10 * relative_gap(results[0][0], r.ctx)) << "as close as fp32: the bf16 products did not run";
  EXPECT_GT(dqkv_gap, 10 * relative_gap(results[0][1], r.dqkv)) << "as close as fp32: the bf16 products did not run";
  EXPECT_EQ(results[2][0], results[1][0]) << "ctx on 3 threads";
  EXPECT_EQ(results[2][1], results[1][1]) << "dqkv on 3 threads";
  std::printf("bf16 attention against the double reference: ctx %.3g, dqkv %.3g of the largest value\n", ctx_gap,
              dqkv_gap);
}

INSTANTIATE_TEST_SUITE_P(DropoutP, CpuAttention, ::testing::Values(0.0f, 0.2f),
                         [](const auto& info) { return info.param == 0.0f ? "NoDropout" : "Dropout"; });

TEST(CpuAttentionChecks, DecreasingSeqStartIsRejected) {
  auto ops = make_cpu_ops(1);
  AttentionLayout layout;
  layout.seq_start = {0, 4, 2};
  std::vector<float> buf(1024);
  try {
    ops->attention_fwd({buf.data(), buf.data(), buf.data(), buf.data(), layout, 2, 4,
                        attention_site(0.0f)});
    FAIL() << "decreasing seq_start accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("seq_start[2] = 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bert
