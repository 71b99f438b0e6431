// CPU LayerNorm (forward against a double loop, large-offset rows, backward against finite
// differences, dgamma/dbeta accumulation) and dropout (Philox mask per element, keep rate,
// same site → same mask, p = 0 identity, backward consistent with the forward mask, in place);
// the fused residual block (residual_layernorm_*) against the unfused ops it replaces.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

constexpr int64_t M = 7;
constexpr int N = 13;

TEST(CpuLayerNorm, ForwardMatchesDoubleLoop) {
  auto ops = make_cpu_ops(2);
  std::vector<float> in = random_floats(M * N, 1, -3.0f, 3.0f);
  for (int j = 0; j < N; ++j) in[6 * N + j] = 1000.0f + 0.01f * static_cast<float>(j % 5);
  const std::vector<float> gamma = random_floats(N, 2, 0.5f, 1.5f);
  const std::vector<float> beta = random_floats(N, 3);
  const float eps = 1e-5f;
  std::vector<float> out(M * N), mean(M), rstd(M);
  ops->layernorm_fwd({out.data(), mean.data(), rstd.data(), in.data(), gamma.data(), beta.data(), M,
                      N, eps});
  std::vector<double> e_out(M * N), e_mean(M), e_rstd(M);
  for (int64_t i = 0; i < M; ++i) {
    double mu = 0.0;
    for (int j = 0; j < N; ++j) mu += in[i * N + j];
    mu /= N;
    double var = 0.0;
    for (int j = 0; j < N; ++j) var += (in[i * N + j] - mu) * (in[i * N + j] - mu);
    var /= N;
    const double rs = 1.0 / std::sqrt(var + eps);
    e_mean[i] = mu;
    e_rstd[i] = rs;
    for (int j = 0; j < N; ++j) e_out[i * N + j] = (in[i * N + j] - mu) * rs * gamma[j] + beta[j];
  }
  expect_close(out, e_out, 1e-5, 1e-5, "layernorm out");
  expect_close(mean, e_mean, 0.0, 1e-7, "layernorm mean");
  expect_close(rstd, e_rstd, 0.0, 1e-6, "layernorm rstd");
}

TEST(CpuLayerNorm, BackwardMatchesFiniteDifferences) {
  auto ops = make_cpu_ops(2);
  std::vector<float> in = random_floats(M * N, 4, -2.0f, 2.0f);
  std::vector<float> gamma = random_floats(N, 5, 0.5f, 1.5f);
  std::vector<float> beta = random_floats(N, 6);
  const std::vector<float> R = random_floats(M * N, 7);
  const float eps = 1e-12f;
  std::vector<float> out(M * N), mean(M), rstd(M);
  auto f = [&]() {
    ops->layernorm_fwd({out.data(), mean.data(), rstd.data(), in.data(), gamma.data(), beta.data(),
                        M, N, eps});
    return weighted_sum(out, R);
  };
  f();
  const std::vector<float> dgamma0 = random_floats(N, 8), dbeta0 = random_floats(N, 9);
  std::vector<float> din(M * N, -7.0f), dgamma = dgamma0, dbeta = dbeta0;
  ops->layernorm_bwd({din.data(), dgamma.data(), dbeta.data(), R.data(), in.data(), mean.data(),
                      rstd.data(), gamma.data(), M, N});
  const float h = 1e-3f;
  const std::vector<double> num_in = numeric_grad(in, f, h);
  std::vector<double> num_gamma = numeric_grad(gamma, f, h);
  std::vector<double> num_beta = numeric_grad(beta, f, h);
  for (int j = 0; j < N; ++j) {
    num_gamma[j] += dgamma0[j];
    num_beta[j] += dbeta0[j];
  }
  expect_close(din, num_in, 2e-3, 2e-3, "layernorm din");
  expect_close(dgamma, num_gamma, 2e-3, 2e-3, "layernorm dgamma (accumulated)");
  expect_close(dbeta, num_beta, 2e-3, 2e-3, "layernorm dbeta (accumulated)");
}

TEST(CpuLayerNorm, ParameterGradientsIndependentOfThreadCount) {
  const int64_t m = 97;
  const int n = 200;
  const std::vector<float> in = random_floats(m * n, 10), gamma = random_floats(n, 11);
  const std::vector<float> beta = random_floats(n, 12), dout = random_floats(m * n, 13);
  std::vector<float> results[2];
  const int threads[2] = {1, 3};
  for (int r = 0; r < 2; ++r) {
    auto ops = make_cpu_ops(threads[r]);
    std::vector<float> out(m * n), mean(m), rstd(m), din(m * n), dgamma(n), dbeta(n);
    ops->layernorm_fwd({out.data(), mean.data(), rstd.data(), in.data(), gamma.data(), beta.data(),
                        m, n, 1e-12f});
    ops->layernorm_bwd({din.data(), dgamma.data(), dbeta.data(), dout.data(), in.data(),
                        mean.data(), rstd.data(), gamma.data(), m, n});
    results[r] = out;
    results[r].insert(results[r].end(), din.begin(), din.end());
    results[r].insert(results[r].end(), dgamma.begin(), dgamma.end());
    results[r].insert(results[r].end(), dbeta.begin(), dbeta.end());
  }
  EXPECT_EQ(results[0], results[1]);
}

DropoutSite site_with(float p, uint64_t step = 3) {
  DropoutSite s;
  s.seed = 0x1234567890abcdefull;
  s.step = step;
  s.tensor_id = 17;
  s.p = p;
  return s;
}

TEST(CpuDropout, KeepsElementsWherePhiloxUniformReachesP) {
  auto ops = make_cpu_ops(2);
  const int64_t n = 100003;  // several parallel chunks and a ragged Philox group at the end
  const std::vector<float> in = random_floats(n, 20), residual = random_floats(n, 21);
  const DropoutSite site = site_with(0.1f);
  std::vector<float> out(n);
  ops->dropout_residual_fwd({out.data(), in.data(), residual.data(), n, site});
  const float keep_scale = 1.0f / (1.0f - site.p);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = philox_uniform_at(site.seed, site.step, site.tensor_id, i) >= site.p;
    kept += keep;
    const float expected = (keep ? in[i] * keep_scale : 0.0f) + residual[i];
    ASSERT_EQ(out[i], expected) << "element " << i;
  }
  // Binomial(n, 0.9): standard deviation ≈ 95; allow 5 of them.
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.9, 5 * 95.0 / n);
}

TEST(CpuDropout, SameSiteSameMaskOtherStepOtherMask) {
  auto ops = make_cpu_ops(3);
  const int64_t n = 40000;
  const std::vector<float> ones(n, 1.0f);
  std::vector<float> a(n), b(n), c(n);
  ops->dropout_residual_fwd({a.data(), ones.data(), nullptr, n, site_with(0.5f)});
  ops->dropout_residual_fwd({b.data(), ones.data(), nullptr, n, site_with(0.5f)});
  ops->dropout_residual_fwd({c.data(), ones.data(), nullptr, n, site_with(0.5f, 4)});
  EXPECT_EQ(a, b);
  int64_t same = 0, kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(a[i] == 0.0f || a[i] == 2.0f) << a[i];
    same += a[i] == c[i];
    kept += a[i] != 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.5, 0.02);
  EXPECT_NEAR(static_cast<double>(same) / n, 0.5, 0.02);  // independent masks agree half the time
}

TEST(CpuDropout, ZeroProbabilityIsIdentity) {
  auto ops = make_cpu_ops(2);
  const int64_t n = 1001;
  const std::vector<float> in = random_floats(n, 22), residual = random_floats(n, 23);
  std::vector<float> out(n), grad(n);
  ops->dropout_residual_fwd({out.data(), in.data(), nullptr, n, site_with(0.0f)});
  EXPECT_EQ(out, in);
  ops->dropout_residual_fwd({out.data(), in.data(), residual.data(), n, site_with(0.0f)});
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], in[i] + residual[i]);
  ops->dropout_bwd({grad.data(), in.data(), n, site_with(0.0f)});
  EXPECT_EQ(grad, in);
}

TEST(CpuDropout, BackwardUsesTheForwardMaskAndWorksInPlace) {
  auto ops = make_cpu_ops(2);
  const int64_t n = 5003;
  const DropoutSite site = site_with(0.3f);
  const std::vector<float> ones(n, 1.0f), dout = random_floats(n, 24);
  std::vector<float> mask(n), din(n);
  ops->dropout_residual_fwd({mask.data(), ones.data(), nullptr, n, site});  // mask·scale
  ops->dropout_bwd({din.data(), dout.data(), n, site});
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(din[i], dout[i] * mask[i]) << "element " << i;
  std::vector<float> inplace = dout;
  ops->dropout_bwd({inplace.data(), inplace.data(), n, site});
  EXPECT_EQ(inplace, din);
}

TEST(CpuDropout, ProbabilityOutsideRangeThrows) {
  auto ops = make_cpu_ops(1);
  std::vector<float> x(4);
  try {
    ops->dropout_residual_fwd({x.data(), x.data(), nullptr, 4, site_with(1.0f)});
    FAIL() << "p = 1 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("tensor id 17"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops->dropout_bwd({x.data(), x.data(), 4, site_with(-0.1f)}), Error);
}

// The residual block's buffers and its unfused reference: dropout_residual_fwd + layernorm_fwd
// forward, layernorm_bwd + dropout_bwd (d_residual = the LayerNorm input gradient) backward.
struct ResidualBlock {
  int64_t m;
  int n;
  std::vector<float> in, residual, gamma, beta, dout;
  std::vector<float> out, res, mean, rstd;        // forward
  std::vector<float> d_in, d_residual, dgamma, dbeta;  // backward (dgamma, dbeta start non-zero)

  ResidualBlock(int64_t m_, int n_, uint32_t seed)
      : m(m_), n(n_), in(random_floats(m * n, seed, -2.0f, 2.0f)), residual(random_floats(m * n, seed + 1, -2.0f, 2.0f)),
        gamma(random_floats(n, seed + 2, 0.5f, 1.5f)), beta(random_floats(n, seed + 3)),
        dout(random_floats(m * n, seed + 4)), out(m * n), res(m * n), mean(m), rstd(m), d_in(m * n),
        d_residual(m * n), dgamma(random_floats(n, seed + 5)), dbeta(random_floats(n, seed + 6)) {}

  void fused(Ops& ops, const DropoutSite& site) {
    ops.residual_layernorm_fwd({out.data(), res.data(), mean.data(), rstd.data(), in.data(), residual.data(),
                                gamma.data(), beta.data(), m, n, 1e-12f, site});
    ops.residual_layernorm_bwd({d_in.data(), d_residual.data(), dgamma.data(), dbeta.data(), dout.data(), res.data(),
                                mean.data(), rstd.data(), gamma.data(), m, n, site});
  }
  void unfused(Ops& ops, const DropoutSite& site) {
    ops.dropout_residual_fwd({res.data(), in.data(), residual.data(), m * n, site});
    ops.layernorm_fwd({out.data(), mean.data(), rstd.data(), res.data(), gamma.data(), beta.data(), m, n, 1e-12f});
    ops.layernorm_bwd({d_residual.data(), dgamma.data(), dbeta.data(), dout.data(), res.data(), mean.data(),
                       rstd.data(), gamma.data(), m, n});
    ops.dropout_bwd({d_in.data(), d_residual.data(), m * n, site});
  }
};

// Shapes: rows that start mid Philox group and mid vectorised block (n = 13, 200), several row
// chunks and parallel chunks (m = 97, 300), and BERT's 768.
TEST(CpuResidualLayerNorm, MatchesTheUnfusedOps) {
  const struct {
    int64_t m;
    int n;
  } shapes[] = {{7, 13}, {97, 200}, {300, 768}};
  for (const auto& shape : shapes) {
    for (float p : {0.0f, 0.1f}) {
      SCOPED_TRACE("m=" + std::to_string(shape.m) + " n=" + std::to_string(shape.n) + " p=" + std::to_string(p));
      auto ops = make_cpu_ops(2);
      ResidualBlock fused(shape.m, shape.n, 30), unfused(shape.m, shape.n, 30);
      fused.fused(*ops, site_with(p));
      unfused.unfused(*ops, site_with(p));
      // Bitwise: the same float expressions per element and the same double row statistics.
      EXPECT_EQ(fused.res, unfused.res);
      EXPECT_EQ(fused.out, unfused.out);
      EXPECT_EQ(fused.mean, unfused.mean);
      EXPECT_EQ(fused.rstd, unfused.rstd);
      EXPECT_EQ(fused.d_residual, unfused.d_residual);
      EXPECT_EQ(fused.d_in, unfused.d_in);
      // dgamma/dbeta: the same double terms summed per row chunk, then over chunks, instead of
      // over all rows at once, rounded to float: within one float rounding of the unfused.
      expect_close(fused.dgamma, unfused.dgamma, 1e-6, 1.2e-7, "dgamma");
      expect_close(fused.dbeta, unfused.dbeta, 1e-6, 1.2e-7, "dbeta");
    }
  }
}

TEST(CpuResidualLayerNorm, DroppedElementsGetNoInputGradient) {
  auto ops = make_cpu_ops(2);
  ResidualBlock b(64, 96, 40);
  const DropoutSite site = site_with(0.25f);
  b.fused(*ops, site);
  const float keep_scale = 1.0f / (1.0f - site.p);
  int64_t dropped = 0;
  for (int64_t i = 0; i < b.m * b.n; ++i) {
    const bool keep = philox_uniform_at(site.seed, site.step, site.tensor_id, i) >= site.p;
    dropped += !keep;
    ASSERT_EQ(b.res[i], (keep ? b.in[i] * keep_scale : 0.0f) + b.residual[i]) << "element " << i;
    ASSERT_EQ(b.d_in[i], keep ? b.d_residual[i] * keep_scale : 0.0f) << "element " << i;
  }
  EXPECT_GT(dropped, 0);
}

TEST(CpuResidualLayerNorm, ResidualGradientInPlaceOverDout) {
  auto ops = make_cpu_ops(3);
  ResidualBlock b(97, 200, 50);
  b.fused(*ops, site_with(0.1f));
  // The same starting dgamma, dbeta as b's (seeds 50 + 5, 50 + 6).
  std::vector<float> grad = b.dout, d_in(b.m * b.n), dgamma = random_floats(b.n, 55), dbeta = random_floats(b.n, 56);
  ops->residual_layernorm_bwd({d_in.data(), grad.data(), dgamma.data(), dbeta.data(), grad.data(), b.res.data(),
                               b.mean.data(), b.rstd.data(), b.gamma.data(), b.m, b.n, site_with(0.1f)});
  EXPECT_EQ(grad, b.d_residual);
  EXPECT_EQ(d_in, b.d_in);
  EXPECT_EQ(dgamma, b.dgamma);  // each dout element was read before d_residual overwrote it
  EXPECT_EQ(dbeta, b.dbeta);
}

TEST(CpuResidualLayerNorm, IndependentOfThreadCount) {
  std::vector<float> results[2];
  const int threads[2] = {1, 3};
  for (int r = 0; r < 2; ++r) {
    auto ops = make_cpu_ops(threads[r]);
    ResidualBlock b(300, 200, 60);
    b.fused(*ops, site_with(0.1f));
    for (const std::vector<float>* v : {&b.out, &b.res, &b.mean, &b.rstd, &b.d_in, &b.d_residual, &b.dgamma, &b.dbeta})
      results[r].insert(results[r].end(), v->begin(), v->end());
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace bert
