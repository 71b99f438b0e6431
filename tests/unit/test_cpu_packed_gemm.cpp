// The packed forward product (cpu_packed_gemm.h): every element against a double loop for row
// counts around the 8-row micro-panels, column counts around the 48-column panels and reduction
// lengths around the 512-long k-blocks, with and without bias, on 1, 2 and 3 threads; the same bits
// on any thread count and for a row whatever the rows around it; C's columns past N untouched.
// Through CpuOps: a forward-only product packs its weights (the held bytes grow) and reads them as
// they are after weights_changed() or when read as another shape; a product a backward pass
// follows does not pack them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_packed_gemm.h"
#include "test_cpu_ops_common.h"

namespace bert {
namespace {

using testing::random_floats;

struct Product {
  int64_t M, N, K;
};

// C[M, ldc] from the packed product on `threads` threads; columns past N hold -7.
std::vector<float> packed_product(const Product& p, const std::vector<float>& X, const std::vector<float>& W,
                                  const float* bias, int64_t ldc, int threads) {
  const PackedWeight packed(W.data(), p.N, p.K, threads);
  std::vector<float> scratch(PackedWeight::scratch_floats(p.M, threads));
  std::vector<float> C(p.M * ldc, -7.0f);
  packed.multiply(p.M, X.data(), p.K, bias, C.data(), ldc, threads, scratch.data());
  return C;
}

class PackedGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!packed_gemm_supported()) GTEST_SKIP() << "the packed product needs AVX-512 (as oneDNN sees this CPU)";
  }
};

TEST_F(PackedGemm, MatchesDoubleLoopOnAnyThreadCount) {
  const Product products[] = {{1, 5, 13},    {7, 48, 512},   {8, 50, 700},  {9, 100, 1100},
                              {130, 1024, 64}, {256, 97, 1024}, {17, 768, 3072}};
  for (const Product& p : products) {
    SCOPED_TRACE("M=" + std::to_string(p.M) + " N=" + std::to_string(p.N) + " K=" + std::to_string(p.K));
    const std::vector<float> X = random_floats(p.M * p.K, 31), W = random_floats(p.N * p.K, 32);
    const std::vector<float> b = random_floats(p.N, 33);
    const int64_t ldc = p.N + 3;
    for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
      const std::vector<float> one = packed_product(p, X, W, bias, ldc, 1);
      double worst = 0.0;
      for (int64_t i = 0; i < p.M; ++i) {
        for (int64_t j = 0; j < p.N; ++j) {
          double sum = bias != nullptr ? bias[j] : 0.0;
          for (int64_t k = 0; k < p.K; ++k) sum += double(X[i * p.K + k]) * W[j * p.K + k];
          worst = std::max(worst, std::abs(one[i * ldc + j] - sum));
        }
        for (int64_t j = p.N; j < ldc; ++j) ASSERT_EQ(one[i * ldc + j], -7.0f) << "row " << i << " column " << j;
      }
      EXPECT_LT(worst, 2e-6 * p.K) << (bias ? "with" : "without") << " bias";
      for (int threads : {2, 3}) {
        EXPECT_EQ(packed_product(p, X, W, bias, ldc, threads), one) << threads << " threads";
      }
    }
  }
}

// Row 5 of a 6-row product has the bits of row 5 of a 200-row one (the rows differ after 6).
TEST_F(PackedGemm, ARowsBitsDoNotDependOnTheOtherRows) {
  const Product big{200, 300, 900}, small{6, 300, 900};
  const std::vector<float> X = random_floats(big.M * big.K, 41), W = random_floats(big.N * big.K, 42);
  const std::vector<float> head(X.begin(), X.begin() + small.M * small.K);
  const std::vector<float> c_big = packed_product(big, X, W, nullptr, big.N, 2);
  const std::vector<float> c_small = packed_product(small, head, W, nullptr, small.N, 1);
  EXPECT_EQ(std::vector<float>(c_big.begin(), c_big.begin() + small.M * small.N), c_small);
}

// A forward-only linear layer on CpuOps: packed (the held bytes grow by the copy), right, and right
// again after the weights change; a forward that a backward pass follows packs nothing.
TEST_F(PackedGemm, CpuOpsPacksForForwardOnlyProductsAndRepacksAfterAChange) {
  const int64_t M = 12, K = 600, N = 130;
  std::vector<float> params = random_floats(N * K + N, 51);
  const std::vector<float> X = random_floats(M * K, 52);
  const float* W = params.data();
  const float* b = params.data() + N * K;
  auto expect_right = [&](const std::vector<float>& out) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double sum = b[j];
        for (int64_t k = 0; k < K; ++k) sum += double(X[i * K + k]) * W[j * K + k];
        ASSERT_NEAR(out[i * N + j], sum, 2e-6 * K) << i << "," << j;
      }
    }
  };
  for (bool forward_only : {true, false}) {
    SCOPED_TRACE(forward_only ? "forward only" : "with a backward pass");
    CpuOps ops(2, false);
    ops.set_weights(params.data(), static_cast<int64_t>(params.size()));
    std::vector<float> out(M * N);
    const size_t held_before = ops.peak_bytes();
    ops.linear_fwd({out.data(), nullptr, X.data(), W, b, M, static_cast<int>(K), static_cast<int>(N),
                    Activation::none, forward_only});
    expect_right(out);
    EXPECT_EQ(ops.peak_bytes() > held_before, forward_only)
        << "held bytes " << held_before << " -> " << ops.peak_bytes();
    for (float& w : params) w = -w;
    ops.weights_changed();
    ops.linear_fwd({out.data(), nullptr, X.data(), W, b, M, static_cast<int>(K), static_cast<int>(N),
                    Activation::none, forward_only});
    expect_right(out);
  }
}

// The same weights read as another shape (the same start, N and K changed) are packed anew.
TEST_F(PackedGemm, CpuOpsRepacksWeightsReadAsAnotherShape) {
  const std::vector<float> params = random_floats(130 * 600, 61);
  CpuOps ops(1, false);
  ops.set_weights(params.data(), static_cast<int64_t>(params.size()));
  for (const Product& p : {Product{5, 130, 600}, Product{5, 65, 1200}}) {
    SCOPED_TRACE("N=" + std::to_string(p.N) + " K=" + std::to_string(p.K));
    const std::vector<float> X = random_floats(p.M * p.K, 62);
    std::vector<float> out(p.M * p.N);
    ops.linear_fwd({out.data(), nullptr, X.data(), params.data(), nullptr, p.M, static_cast<int>(p.K),
                    static_cast<int>(p.N), Activation::none, true});
    for (int64_t i = 0; i < p.M; ++i) {
      for (int64_t j = 0; j < p.N; ++j) {
        double sum = 0.0;
        for (int64_t k = 0; k < p.K; ++k) sum += double(X[i * p.K + k]) * params[j * p.K + k];
        ASSERT_NEAR(out[i * p.N + j], sum, 2e-6 * p.K) << i << "," << j;
      }
    }
  }
}

}  // namespace
}  // namespace bert
