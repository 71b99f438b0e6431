// CPU linear layer: forward (every activation, with and without bias) against a double-precision
// loop; backward (din, dW, db) against central finite differences of sum(out ⊙ R); the
// accumulate semantics of dW/db/din; the activation alone equals the epilogue; argument
// checks; bitwise run-to-run determinism, also of the forward's column slices on 2 and 3 threads
// and of the backward's pair of products on 1 to 4.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"
#include "test_cpu_ops_common.h"

namespace bert {
namespace {

using testing::expect_close;
using testing::numeric_grad;
using testing::random_floats;
using testing::weighted_sum;

constexpr int64_t M = 7;
constexpr int K = 13, N = 5;

double reference_activation(Activation act, double x) {
  switch (act) {
    case Activation::none: return x;
    case Activation::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::tanh: return std::tanh(x);
  }
  return 0.0;
}

std::string act_name(Activation act) {
  switch (act) {
    case Activation::none: return "none";
    case Activation::gelu_erf: return "gelu_erf";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::tanh: return "tanh";
  }
  return "?";
}

class CpuLinear : public ::testing::TestWithParam<Activation> {};

TEST_P(CpuLinear, ForwardMatchesDoubleLoop) {
  const Activation act = GetParam();
  auto ops = make_cpu_ops(2);
  const std::vector<float> in = random_floats(M * K, 1, -2.0f, 2.0f);
  const std::vector<float> W = random_floats(N * K, 2, -0.5f, 0.5f);
  const std::vector<float> b = random_floats(N, 3);
  for (bool with_bias : {true, false}) {
    std::vector<double> expected_pre(M * N), expected_out(M * N);
    for (int64_t i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        double s = with_bias ? b[j] : 0.0;
        for (int k = 0; k < K; ++k) s += static_cast<double>(in[i * K + k]) * W[j * K + k];
        expected_pre[i * N + j] = s;
        expected_out[i * N + j] = reference_activation(act, s);
      }
    }
    std::vector<float> out(M * N), pre(M * N);
    ops->linear_fwd({out.data(), act == Activation::none ? nullptr : pre.data(), in.data(),
                     W.data(), with_bias ? b.data() : nullptr, M, K, N, act});
    const std::string what = act_name(act) + (with_bias ? " with bias" : " without bias");
    expect_close(out, expected_out, 1e-6, 1e-5, what + " out");
    if (act != Activation::none) expect_close(pre, expected_pre, 1e-6, 1e-5, what + " pre_act");
  }
}

// activation_fwd (used to recompute GELU in backward) must reproduce the fused epilogue exactly.
TEST_P(CpuLinear, ActivationAloneEqualsTheEpilogueBitwise) {
  const Activation act = GetParam();
  if (act == Activation::none) GTEST_SKIP() << "no activation";
  auto ops = make_cpu_ops(2);
  const std::vector<float> in = random_floats(M * K, 4, -2.0f, 2.0f);
  const std::vector<float> W = random_floats(N * K, 5, -0.5f, 0.5f);
  const std::vector<float> b = random_floats(N, 6);
  std::vector<float> out(M * N), pre(M * N), again(M * N);
  ops->linear_fwd({out.data(), pre.data(), in.data(), W.data(), b.data(), M, K, N, act});
  ops->activation_fwd({again.data(), pre.data(), M * N, act});
  EXPECT_EQ(again, out) << act_name(act);
}

TEST_P(CpuLinear, BackwardMatchesFiniteDifferences) {
  const Activation act = GetParam();
  auto ops = make_cpu_ops(2);
  std::vector<float> in = random_floats(M * K, 4, -2.0f, 2.0f);
  std::vector<float> W = random_floats(N * K, 5, -0.5f, 0.5f);
  std::vector<float> b = random_floats(N, 6);
  const std::vector<float> R = random_floats(M * N, 7);
  std::vector<float> out(M * N), pre(M * N);
  float* pre_ptr = act == Activation::none ? nullptr : pre.data();
  auto f = [&]() {
    ops->linear_fwd({out.data(), pre_ptr, in.data(), W.data(), b.data(), M, K, N, act});
    return weighted_sum(out, R);
  };
  f();
  // dW and db accumulate onto what is there; din is overwritten (start from garbage).
  const std::vector<float> dW0 = random_floats(N * K, 8), db0 = random_floats(N, 9);
  std::vector<float> din(M * K, 123.0f), dW = dW0, db = db0, scratch(M * N);
  ops->linear_bwd({din.data(), dW.data(), db.data(), R.data(), in.data(), W.data(), pre_ptr,
                   act == Activation::none ? nullptr : scratch.data(), M, K, N, act, false});
  const float h = 1e-2f;
  const std::vector<double> num_in = numeric_grad(in, f, h);
  std::vector<double> num_W = numeric_grad(W, f, h);
  std::vector<double> num_b = numeric_grad(b, f, h);
  for (size_t i = 0; i < num_W.size(); ++i) num_W[i] += dW0[i];
  for (size_t i = 0; i < num_b.size(); ++i) num_b[i] += db0[i];
  const std::string what = act_name(act);
  expect_close(din, num_in, 2e-3, 2e-3, what + " din");
  expect_close(dW, num_W, 2e-3, 2e-3, what + " dW (accumulated)");
  expect_close(db, num_b, 2e-3, 2e-3, what + " db (accumulated)");

  // accumulate_din adds the same gradient onto din (f() restores pre_act after the probes).
  f();
  const std::vector<float> din_first = din;
  std::vector<float> din_acc = random_floats(M * K, 10);
  const std::vector<float> din_acc0 = din_acc;
  ops->linear_bwd({din_acc.data(), nullptr, nullptr, R.data(), in.data(), W.data(), pre_ptr,
                   act == Activation::none ? nullptr : scratch.data(), M, K, N, act, true});
  std::vector<double> expected(M * K);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = double(din_acc0[i]) + din_first[i];
  expect_close(din_acc, expected, 1e-6, 1e-6, what + " accumulate_din");
}

INSTANTIATE_TEST_SUITE_P(Activations, CpuLinear,
                         ::testing::Values(Activation::none, Activation::gelu_erf,
                                           Activation::gelu_tanh, Activation::tanh),
                         [](const auto& info) { return act_name(info.param); });

TEST(CpuLinearChecks, ActivationWithoutPreActThrows) {
  auto ops = make_cpu_ops(1);
  std::vector<float> in(M * K), W(N * K), out(M * N);
  try {
    ops->linear_fwd({out.data(), nullptr, in.data(), W.data(), nullptr, M, K, N, Activation::gelu_erf});
    FAIL() << "missing pre_act accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("pre_act"), std::string::npos) << e.what();
  }
  try {
    ops->linear_fwd({out.data(), nullptr, in.data(), W.data(), nullptr, M, 0, N, Activation::none});
    FAIL() << "K = 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K=0"), std::string::npos) << e.what();
  }
}

TEST(CpuLinearDeterminism, TwoRunsAreBitwiseEqual) {
  // Large enough for Eigen's blocked, multi-threaded GEMM.
  const int64_t m = 301;
  const int k = 257, n = 131;
  auto ops = make_cpu_ops(2);
  const std::vector<float> in = random_floats(m * k, 11), W = random_floats(n * k, 12);
  const std::vector<float> b = random_floats(n, 13), dout = random_floats(m * n, 14);
  std::vector<float> out[2], pre[2], din[2], dW[2], db[2];
  for (int run = 0; run < 2; ++run) {
    out[run].resize(m * n);
    pre[run].resize(m * n);
    din[run].resize(m * k);
    dW[run].assign(n * k, 0.0f);
    db[run].assign(n, 0.0f);
    std::vector<float> scratch(m * n);
    ops->linear_fwd({out[run].data(), pre[run].data(), in.data(), W.data(), b.data(), m, k, n,
                     Activation::gelu_erf});
    ops->linear_bwd({din[run].data(), dW[run].data(), db[run].data(), dout.data(), in.data(),
                     W.data(), pre[run].data(), scratch.data(), m, k, n, Activation::gelu_erf, false});
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(din[0], din[1]);
  EXPECT_EQ(dW[0], dW[1]);
  EXPECT_EQ(db[0], db[1]);
  // Spot-check the big GEMM against a double loop too.
  for (int64_t i : {int64_t{0}, int64_t{150}, m - 1}) {
    for (int j : {0, 77, n - 1}) {
      double s = b[j];
      for (int kk = 0; kk < k; ++kk) s += double(in[i * k + kk]) * W[j * k + kk];
      EXPECT_NEAR(pre[0][i * n + j], s, 1e-4) << i << "," << j;
    }
  }
}

// The forward product runs in column slices on several threads (cpu_gemm.cpp): on 1, 2 and 3
// threads the columns at the slices' edges are the right ones, and a second run on the same
// threads gives the same bits. The first shape is bert-large's attention output on 512 tokens
// (two slices of 512); the second leaves a narrower last slice (160 + 140 columns).
TEST(CpuLinearThreads, ForwardSlicesAreRightAndDeterministic) {
  const struct { int64_t m; int k, n; } shapes[] = {{512, 1024, 1024}, {64, 300, 300}, {33, 1024, 4096}};
  for (const auto& s : shapes) {
    SCOPED_TRACE("M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) + " N=" + std::to_string(s.n));
    const std::vector<float> in = random_floats(s.m * s.k, 21), W = random_floats(int64_t{s.n} * s.k, 22);
    for (int threads = 1; threads <= 3; ++threads) {
      auto ops = make_cpu_ops(threads);
      std::vector<float> out[2];
      for (auto& o : out) {
        o.assign(s.m * s.n, 0.0f);
        ops->linear_fwd({o.data(), nullptr, in.data(), W.data(), nullptr, s.m, s.k, s.n, Activation::none});
      }
      EXPECT_EQ(out[1], out[0]) << threads << " threads";
      for (int64_t i : {int64_t{0}, s.m - 1}) {
        for (int j : {0, 127, 128, 159, 160, s.n / 3, s.n / 2 - 1, s.n / 2, s.n - 1}) {
          double sum = 0;
          for (int kk = 0; kk < s.k; ++kk) sum += double(in[i * s.k + kk]) * W[int64_t{j} * s.k + kk];
          EXPECT_NEAR(out[0][i * s.n + j], sum, 1e-4 * std::sqrt(double(s.k)))
              << threads << " threads, " << i << "," << j;
        }
      }
    }
  }
}

// The backward products dW and dX run at once in column slices (cpu_gemm_pair): on 1 to 4
// threads, dW accumulating onto what it held and dX overwritten or accumulated, the columns at the
// slices' edges are the right ones, and a second run on the same threads gives the same bits.
// Shapes as above: bert-large's attention output on 512 tokens, a narrow last slice, a wide K.
TEST(CpuLinearThreads, BackwardPairIsRightAndDeterministic) {
  const struct { int64_t m; int k, n; } shapes[] = {{512, 1024, 1024}, {64, 300, 300}, {33, 4096, 1024}};
  for (const auto& s : shapes) {
    SCOPED_TRACE("M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) + " N=" + std::to_string(s.n));
    const std::vector<float> in = random_floats(s.m * s.k, 31), W = random_floats(int64_t{s.n} * s.k, 32);
    const std::vector<float> dout = random_floats(s.m * s.n, 33), dW0 = random_floats(int64_t{s.n} * s.k, 34);
    const std::vector<float> din0 = random_floats(s.m * s.k, 35);
    for (int threads = 1; threads <= 4; ++threads) {
      for (bool accumulate_din : {false, true}) {
        auto ops = make_cpu_ops(threads);
        std::vector<float> dW[2], din[2];
        for (int run = 0; run < 2; ++run) {
          dW[run] = dW0;
          din[run] = din0;
          ops->linear_bwd({din[run].data(), dW[run].data(), nullptr, dout.data(), in.data(), W.data(), nullptr,
                           nullptr, s.m, s.k, s.n, Activation::none, accumulate_din});
        }
        EXPECT_EQ(dW[1], dW[0]) << threads << " threads";
        EXPECT_EQ(din[1], din[0]) << threads << " threads";
        const double tol_dW = 1e-4 * std::sqrt(double(s.m)), tol_din = 1e-4 * std::sqrt(double(s.n));
        for (int j : {0, 127, 128, 159, 160, s.k / 4, s.k / 3, s.k / 2 - 1, s.k / 2, 3 * s.k / 4, s.k - 1}) {
          for (int r : {0, s.n / 2, s.n - 1}) {  // dW[r, j] = Σ_i dout[i, r] in[i, j] + what it held
            double sum = dW0[int64_t{r} * s.k + j];
            for (int64_t i = 0; i < s.m; ++i) sum += double(dout[i * s.n + r]) * in[i * s.k + j];
            EXPECT_NEAR(dW[0][int64_t{r} * s.k + j], sum, tol_dW) << threads << " threads, dW " << r << "," << j;
          }
          for (int64_t i : {int64_t{0}, s.m - 1}) {  // din[i, j] = Σ_r dout[i, r] W[r, j] (+ what it held)
            double sum = accumulate_din ? din0[i * s.k + j] : 0.0;
            for (int r = 0; r < s.n; ++r) sum += double(dout[i * s.n + r]) * W[int64_t{r} * s.k + j];
            EXPECT_NEAR(din[0][i * s.k + j], sum, tol_din) << threads << " threads, din " << i << "," << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace bert
