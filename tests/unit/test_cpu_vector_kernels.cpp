// The CPU backend's vectorised building blocks against their scalar definitions: exp, erf and
// tanh over arrays (every length's tail, in place, extreme arguments) within 4 ulp of libm, and
// dropout's block-wise Philox masks bit-identical to philox_uniform_at for unaligned ranges and
// group indices above 2^32, and the fp32 -> bf16 conversion of GEMM operands bit-identical to
// core/half.h's (ties, subnormals, infinities, NaNs, every length's tail).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_philox.h"
#include "backend/cpu/cpu_vector_math.h"
#include "core/half.h"
#include "core/philox.h"

namespace bert {
namespace {

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return a == b ? 0 : INT64_MAX;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

void expect_within_ulps(void (*vec)(float*, const float*, int64_t), float (*scalar)(float), float lo, float hi,
                        const char* name) {
  for (int64_t n : {1, 3, 4, 7, 8, 15, 16, 17, 33, 1000}) {
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n);
    vec(y.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_LE(ulps(y[i], scalar(x[i])), 4) << name << "(" << x[i] << ") = " << y[i] << ", libm " << scalar(x[i])
                                             << " (n=" << n << ", " << vector_math_isa() << ")";
    }
    vec(x.data(), x.data(), n);  // in place
    EXPECT_EQ(std::memcmp(x.data(), y.data(), n * sizeof(float)), 0) << name << " in place, n=" << n;
  }
}

TEST(CpuVectorMath, ExpErfTanhWithin4UlpOfLibm) {
  expect_within_ulps(vector_exp, [](float x) { return std::exp(x); }, -87.0f, 88.0f, "exp");
  expect_within_ulps(vector_erf, [](float x) { return std::erf(x); }, -6.0f, 6.0f, "erf");
  expect_within_ulps(vector_tanh, [](float x) { return std::tanh(x); }, -10.0f, 10.0f, "tanh");
  float big[3] = {-1000.0f, 0.0f, 1000.0f}, out[3];
  vector_exp(out, big, 3);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_TRUE(std::isinf(out[2]));
}

// Below -87 expf is subnormal, then 0 (from about -103.97): the vector exp stays within 4 ulp of
// libm there and is 0 exactly where libm's is, NaN stays NaN, and a row of masked keys (-10000) costs no more than a row of ordinary
// scores (libmvec's scalar path for such lanes took 5-9 ns a lane against 0.3 on Zen 4).
TEST(CpuVectorMath, ExpUnderflowIsLibmsAndFast) {
  std::vector<float> x;
  for (float v = -110.0f; v < -86.0f; v += 0.0625f) x.push_back(v);
  for (float v : {-103.97f, -103.98f, -104.0f, -104.01f, -1e4f, -1e30f, -INFINITY, NAN}) x.push_back(v);
  std::vector<float> y(x.size());
  vector_exp(y.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    EXPECT_LE(ulps(y[i], std::exp(x[i])), 4) << "exp(" << x[i] << ") = " << y[i] << ", libm " << std::exp(x[i])
                                             << " (" << vector_math_isa() << ")";
  }
  const auto ns_per_element = [](float value) {
    std::vector<float> in(512, value), out(512);
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 2000; ++r) vector_exp(out.data(), in.data(), 512);
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / (2000 * 512);
  };
  double masked = 1e30, ordinary = 1e30;  // best of 3, alternating
  for (int round = 0; round < 3; ++round) {
    masked = std::min(masked, ns_per_element(-1e4f));
    ordinary = std::min(ordinary, ns_per_element(-1.5f));
  }
  EXPECT_LT(masked, 3.0 * ordinary) << "masked keys " << masked << " ns per exp, ordinary scores " << ordinary;
}

// dropout_apply's mask is philox_uniform_at(...) >= p element by element, at any start and length
// (inside one 256-element block, across blocks, group indices above 2^32), with and without the
// residual, in place, and with p = 0 (no draw: the input, or input + residual, unchanged).
TEST(CpuDropoutApply, MasksByPhiloxUniformAtBitForBit) {
  DropoutSite site;
  site.seed = 0x123456789ABCDEFull;
  site.step = 77;
  site.tensor_id = 5;
  std::vector<float> in(1100), residual(1100);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = std::sin(0.37f * i) * 3.0f;
    residual[i] = std::cos(0.11f * i);
  }
  int64_t dropped = 0, checked = 0;
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
    site.p = p;
    const float keep_scale = dropout_keep_scale(site);
    for (int64_t base : {int64_t{0}, int64_t{1} << 34}) {
      for (auto [begin, n] : {std::pair<int64_t, int64_t>{0, 256}, {3, 247}, {255, 1}, {1, 1}, {100, 0}, {250, 780}}) {
        for (bool with_residual : {false, true}) {
          std::vector<float> out(in.begin(), in.begin() + n);  // in place
          dropout_apply(out.data(), out.data(), with_residual ? residual.data() : nullptr, site, base + begin, n);
          for (int64_t j = 0; j < n; ++j) {
            const bool keep =
                philox_uniform_at(site.seed, site.step, site.tensor_id, static_cast<uint64_t>(base + begin + j)) >= p;
            const float kept = keep ? in[j] * keep_scale : 0.0f;
            const float expected = with_residual ? kept + residual[j] : kept;
            ASSERT_EQ(out[j], expected) << "p " << p << " element " << base + begin + j;
            dropped += !keep;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(dropped, checked / 5);  // the masks are not all-keep
}

// dropout_apply_pair draws once and gives each array what dropout_apply gives it (the second in place).
TEST(CpuDropoutApply, PairEqualsTwoSingleApplies) {
  for (float p : {0.0f, 0.1f}) {
    const DropoutSite site{0xC0FFEEull, 3, 9, p};
    std::vector<float> a(700), b(700);
    for (size_t i = 0; i < a.size(); ++i) a[i] = 1.0f + i, b[i] = -0.5f * i;
    std::vector<float> a1(a.size()), b1 = b, a2(a.size()), b2 = b;
    dropout_apply(a1.data(), a.data(), nullptr, site, 77, 700);
    dropout_apply(b1.data(), b1.data(), nullptr, site, 77, 700);
    dropout_apply_pair(a2.data(), a.data(), b2.data(), b2.data(), site, 77, 700);
    EXPECT_EQ(a1, a2) << "p " << p;
    EXPECT_EQ(b1, b2) << "p " << p;
  }
}

TEST(CpuBf16Conversion, EqualsTheScalarRoundingBitForBit) {
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x7F800000u, 0xFF800000u,
                                0x7F800001u, 0xFFC00000u, 0x7FBF0000u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu,
                                0x7F7FFFFFu, 0x477FE000u, 0x7F7F8000u};
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 100000; ++i) {  // random bit patterns: every exponent, NaN payloads included
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bits.push_back(static_cast<uint32_t>(state >> 32));
  }
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * sizeof(float));
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{17}, int64_t{33}, static_cast<int64_t>(x.size())}) {
    std::vector<uint16_t> out(n + 1, 0xABCD);
    floats_to_bf16(out.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], float_to_bf16_bits(x[i])) << "bits 0x" << std::hex << bits[i] << " (n=" << std::dec << n << ")";
    }
    EXPECT_EQ(out[n], 0xABCD) << "wrote past n=" << n;
  }
}

}  // namespace
}  // namespace bert
