// CPU LayerNorm (forward against a double loop, large-offset rows, backward against finite
// differences, dgamma/dbeta accumulation) and dropout (Philox mask per element, keep rate,
// same site → same mask, p = 0 identity, backward consistent with the forward mask, in place).
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
  ops->layernorm_fwd(out.data(), mean.data(), rstd.data(), in.data(), gamma.data(), beta.data(), M,
                     N, eps);
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
    ops->layernorm_fwd(out.data(), mean.data(), rstd.data(), in.data(), gamma.data(), beta.data(),
                       M, N, eps);
    return weighted_sum(out, R);
  };
  f();
  const std::vector<float> dgamma0 = random_floats(N, 8), dbeta0 = random_floats(N, 9);
  std::vector<float> din(M * N, -7.0f), dgamma = dgamma0, dbeta = dbeta0;
  ops->layernorm_bwd(din.data(), dgamma.data(), dbeta.data(), R.data(), in.data(), mean.data(),
                     rstd.data(), gamma.data(), M, N);
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
    ops->layernorm_fwd(out.data(), mean.data(), rstd.data(), in.data(), gamma.data(), beta.data(),
                       m, n, 1e-12f);
    ops->layernorm_bwd(din.data(), dgamma.data(), dbeta.data(), dout.data(), in.data(),
                       mean.data(), rstd.data(), gamma.data(), m, n);
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
  ops->dropout_residual_fwd(out.data(), in.data(), residual.data(), n, site);
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
  ops->dropout_residual_fwd(a.data(), ones.data(), nullptr, n, site_with(0.5f));
  ops->dropout_residual_fwd(b.data(), ones.data(), nullptr, n, site_with(0.5f));
  ops->dropout_residual_fwd(c.data(), ones.data(), nullptr, n, site_with(0.5f, 4));
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
  ops->dropout_residual_fwd(out.data(), in.data(), nullptr, n, site_with(0.0f));
  EXPECT_EQ(out, in);
  ops->dropout_residual_fwd(out.data(), in.data(), residual.data(), n, site_with(0.0f));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], in[i] + residual[i]);
  ops->dropout_bwd(grad.data(), in.data(), n, site_with(0.0f));
  EXPECT_EQ(grad, in);
}

TEST(CpuDropout, BackwardUsesTheForwardMaskAndWorksInPlace) {
  auto ops = make_cpu_ops(2);
  const int64_t n = 5003;
  const DropoutSite site = site_with(0.3f);
  const std::vector<float> ones(n, 1.0f), dout = random_floats(n, 24);
  std::vector<float> mask(n), din(n);
  ops->dropout_residual_fwd(mask.data(), ones.data(), nullptr, n, site);  // mask·scale
  ops->dropout_bwd(din.data(), dout.data(), n, site);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(din[i], dout[i] * mask[i]) << "element " << i;
  std::vector<float> inplace = dout;
  ops->dropout_bwd(inplace.data(), inplace.data(), n, site);
  EXPECT_EQ(inplace, din);
}

TEST(CpuDropout, ProbabilityOutsideRangeThrows) {
  auto ops = make_cpu_ops(1);
  std::vector<float> x(4);
  try {
    ops->dropout_residual_fwd(x.data(), x.data(), nullptr, 4, site_with(1.0f));
    FAIL() << "p = 1 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("tensor id 17"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops->dropout_bwd(x.data(), x.data(), 4, site_with(-0.1f)), Error);
}

}  // namespace
}  // namespace bert
