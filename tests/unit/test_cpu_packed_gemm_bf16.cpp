// The reordered bf16 weights (cpu_packed_gemm_bf16.h): every element against a double loop over
// the bf16-rounded inputs for row counts from 1 to 1,300, with and without bias, on 1 and 2
// threads; the same bits when called again; few primitives for any number of row counts. Through CpuOps with bf16 GEMM inputs: a forward-only
// product reorders its weights (the held bytes grow) and gives cpu_gemm_bf16's result within the
// sums' rounding, and reads the weights as they are after weights_changed().
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_packed_gemm_bf16.h"
#include "core/half.h"
#include "test_cpu_ops_common.h"

namespace bert {
namespace {

using testing::random_floats;

struct Product {
  int64_t M, N, K;
};

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  floats_to_bf16(out.data(), x.data(), static_cast<int64_t>(x.size()));
  return out;
}

// The largest |C - X16·W16ᵀ - bias| over the product, sums in double of the rounded inputs.
double worst_error(const Product& p, const std::vector<float>& C, const std::vector<uint16_t>& X16,
                   const std::vector<uint16_t>& W16, const float* bias) {
  std::vector<double> x(X16.size()), w(W16.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = bf16_bits_to_float(X16[i]);
  for (size_t i = 0; i < w.size(); ++i) w[i] = bf16_bits_to_float(W16[i]);
  double worst = 0.0;
  for (int64_t i = 0; i < p.M; ++i) {
    for (int64_t j = 0; j < p.N; ++j) {
      double sum = bias != nullptr ? bias[j] : 0.0;
      for (int64_t k = 0; k < p.K; ++k) sum += x[i * p.K + k] * w[j * p.K + k];
      worst = std::max(worst, std::abs(C[i * p.N + j] - sum));
    }
  }
  return worst;
}

class PackedGemmBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_native_bf16()) GTEST_SKIP() << "bf16 GEMM inputs need AVX512-BF16 or AMX; oneDNN sees " << cpu_isa_name();
  }
};

TEST_F(PackedGemmBf16, MatchesDoubleLoopOfTheRoundedInputs) {
  const Product products[] = {{1, 5, 13}, {7, 48, 512}, {33, 100, 1100}, {128, 768, 768}, {700, 97, 64},
                              {17, 768, 3072}};
  for (const Product& p : products) {
    SCOPED_TRACE("M=" + std::to_string(p.M) + " N=" + std::to_string(p.N) + " K=" + std::to_string(p.K));
    const std::vector<float> X = random_floats(p.M * p.K, 71), W = random_floats(p.N * p.K, 72);
    const std::vector<float> b = random_floats(p.N, 73);
    const std::vector<uint16_t> X16 = to_bf16(X), W16 = to_bf16(W);
    for (int threads : {1, 2}) {
      PackedWeightBf16 packed(W.data(), p.N, p.K, threads);
      EXPECT_GE(packed.bytes(), static_cast<size_t>(p.N * p.K * 2));
      for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
        SCOPED_TRACE(std::to_string(threads) + " thread(s), " + (bias ? "with" : "without") + " bias");
        std::vector<float> C(p.M * p.N);
        packed.multiply(p.M, X16.data(), bias, C.data(), threads);
        EXPECT_LT(worst_error(p, C, X16, W16, bias), 2e-6 * p.K);
        std::vector<float> again(p.M * p.N);
        packed.multiply(p.M, X16.data(), bias, again.data(), threads);
        EXPECT_EQ(again, C);
      }
    }
  }
}

// Every row count from 1 to 80 and some past 512 (the rows up to a multiple of 512 in one call,
// the rest padded to a multiple of 32): each right, few primitives made for them all, and the first row count's bits the same
// when it comes back.
TEST_F(PackedGemmBf16, AnyRowCountWithFewPrimitives) {
  const int64_t N = 64, K = 96, most = 1300;
  const std::vector<float> W = random_floats(N * K, 81), X = random_floats(most * K, 82), b = random_floats(N, 83);
  const std::vector<uint16_t> W16 = to_bf16(W), X16 = to_bf16(X);
  PackedWeightBf16 packed(W.data(), N, K, 1);
  std::vector<int64_t> rows;
  for (int64_t M = 1; M <= 80; ++M) rows.push_back(M);
  const int64_t past_a_block[] = {511, 512, 513, 544, 1023, 1024, 1100, most};
  rows.insert(rows.end(), std::begin(past_a_block), std::end(past_a_block));
  std::vector<float> first;
  for (int64_t M : rows) {
    std::vector<float> C(M * N);
    packed.multiply(M, X16.data(), b.data(), C.data(), 1);
    ASSERT_LT(worst_error({M, N, K}, C, X16, W16, b.data()), 2e-6 * K) << "M=" << M;
    if (M == 5) first = C;
  }
  // 32, 64, 96 for the first 80; 512, 1024 and 32-row multiples up to 512 for the rest.
  EXPECT_LE(packed.primitives(), 12u);
  std::vector<float> C(5 * N);
  packed.multiply(5, X16.data(), b.data(), C.data(), 1);
  EXPECT_EQ(C, first);
}

// A forward-only linear layer on a bf16 CpuOps: the weights reordered (the held bytes grow), the
// result within the sums' rounding of the layer a backward pass follows (cpu_gemm_bf16), and
// right for other weights too.
TEST_F(PackedGemmBf16, CpuOpsReordersForForwardOnlyProductsAndAgainAfterAChange) {
  const int64_t M = 40, K = 600, N = 130;
  std::vector<float> params = random_floats(N * K + N, 91);
  const std::vector<float> X = random_floats(M * K, 92);
  const float* W = params.data();
  const float* b = params.data() + N * K;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "first weights" : "other weights");
    std::vector<float> out[2];
    size_t grew[2];
    for (bool forward_only : {true, false}) {
      CpuOps ops(2, true);
      ops.set_weights(params.data(), static_cast<int64_t>(params.size()));
      out[forward_only].resize(M * N);
      const size_t held_before = ops.peak_bytes();
      ops.linear_fwd({out[forward_only].data(), nullptr, X.data(), W, b, M, static_cast<int>(K), static_cast<int>(N),
                      Activation::none, forward_only});
      grew[forward_only] = ops.peak_bytes() - held_before;
    }
    EXPECT_GE(grew[true], static_cast<size_t>(N * K * 2));
    EXPECT_EQ(grew[false], 0u);
    double worst = 0.0;
    for (int64_t i = 0; i < M * N; ++i) worst = std::max(worst, double(std::abs(out[true][i] - out[false][i])));
    EXPECT_LT(worst, 4e-6 * K);
    const std::vector<uint16_t> X16 = to_bf16(X), W16 = to_bf16(std::vector<float>(W, W + N * K));
    EXPECT_LT(worst_error({M, N, K}, out[true], X16, W16, b), 2e-6 * K);
    for (float& w : params) w = 0.5f - w;
  }
}

// One CpuOps across a weights change: the second product reads the new weights.
TEST_F(PackedGemmBf16, CpuOpsReadsTheNewWeightsAfterWeightsChanged) {
  const int64_t M = 3, K = 64, N = 32;
  std::vector<float> params = random_floats(N * K, 95);
  const std::vector<float> X = random_floats(M * K, 96);
  CpuOps ops(1, true);
  ops.set_weights(params.data(), static_cast<int64_t>(params.size()));
  std::vector<float> out(M * N);
  ops.linear_fwd({out.data(), nullptr, X.data(), params.data(), nullptr, M, static_cast<int>(K), static_cast<int>(N),
                  Activation::none, true});
  for (float& w : params) w = -w;
  ops.weights_changed();
  std::vector<float> negated(M * N);
  ops.linear_fwd({negated.data(), nullptr, X.data(), params.data(), nullptr, M, static_cast<int>(K),
                  static_cast<int>(N), Activation::none, true});
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(negated[i], -out[i]) << i;
}

}  // namespace
}  // namespace bert
