// The fp32 <-> bf16/fp16 cast kernels (kernels/cast.cu) against the host conversions of
// core/half.h: bitwise equal (NaNs compared as NaNs), for aligned buffers (the 128-bit path),
// misaligned ones (the element path), lengths that leave a tail, a scale, and the special values
// the gradient wire format meets: ±0, subnormals, values that overflow fp16, ±inf, NaN.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "kernels/cast.h"
#include "core/half.h"

namespace bert {
namespace {

using kernels::LowPrecision;

uint16_t host_to_bits(float x, LowPrecision kind) {
  return kind == LowPrecision::bf16 ? float_to_bf16_bits(x) : float_to_fp16_bits(x);
}

float host_from_bits(uint16_t b, LowPrecision kind) {
  return kind == LowPrecision::bf16 ? bf16_bits_to_float(b) : fp16_bits_to_float(b);
}

bool is_nan_bits(uint16_t b, LowPrecision kind) { return std::isnan(host_from_bits(b, kind)); }

std::vector<float> test_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng) * std::exp2(static_cast<float>(static_cast<int>(rng() % 40) - 20));
  const float specials[] = {0.0f, -0.0f, 1e-40f, -3e-39f, 6e-8f, 65504.0f, 65520.0f, 7e4f, 1e30f,
                            -1e38f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 1.00390625f, 1.01171875f};
  for (size_t i = 0; i < sizeof(specials) / sizeof(float) && i < n; ++i) v[i * 7 % n] = specials[i];
  return v;
}

class CudaCasts : public ::testing::Test {
 protected:
  void SetUp() override {
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&src), kMax * sizeof(float) + 64));
    CUDA_CHECK(cudaMalloc(&lowp, kMax * 2 + 64));
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&back), kMax * sizeof(float) + 64));
  }
  void TearDown() override {
    cudaFree(src);
    cudaFree(lowp);
    cudaFree(back);
    cudaStreamDestroy(stream);
  }

  // Casts n values at the given byte shifts of the buffers there and back, checking both ways.
  void round_trip(size_t n, size_t shift32, size_t shift16, float scale, LowPrecision kind) {
    const std::string what = std::string(kind == LowPrecision::bf16 ? "bf16" : "fp16") +
                             " n=" + std::to_string(n) + " shifts " + std::to_string(shift32) +
                             "/" + std::to_string(shift16) + " scale " + std::to_string(scale);
    const std::vector<float> host = test_values(n, static_cast<uint32_t>(n + shift32));
    auto* s = reinterpret_cast<float*>(reinterpret_cast<char*>(src) + shift32);
    auto* l = reinterpret_cast<char*>(lowp) + shift16;
    auto* b = reinterpret_cast<float*>(reinterpret_cast<char*>(back) + shift32);
    CUDA_CHECK(cudaMemcpy(s, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    kernels::cast_to_lowp(l, s, static_cast<int64_t>(n), scale, kind, stream);
    kernels::cast_from_lowp(b, l, static_cast<int64_t>(n), 1.0f / scale, kind, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<uint16_t> bits(n);
    std::vector<float> out(n);
    CUDA_CHECK(cudaMemcpy(bits.data(), l, n * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(out.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
    size_t bad_to = 0, bad_from = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint16_t want = host_to_bits(host[i] * scale, kind);
      const bool to_ok = is_nan_bits(want, kind) ? is_nan_bits(bits[i], kind) : bits[i] == want;
      if (!to_ok && bad_to++ == 0)
        ADD_FAILURE() << what << ": element " << i << " = " << host[i] << " cast to 0x" << std::hex
                      << bits[i] << ", host 0x" << want;
      const float want_back = host_from_bits(bits[i], kind) * (1.0f / scale);
      const bool from_ok = std::isnan(want_back) ? std::isnan(out[i])
                                                 : std::memcmp(&want_back, &out[i], 4) == 0;
      if (!from_ok && bad_from++ == 0)
        ADD_FAILURE() << what << ": element " << i << " back as " << out[i] << ", host "
                      << want_back;
    }
    EXPECT_EQ(bad_to, 0u) << what;
    EXPECT_EQ(bad_from, 0u) << what;
  }

  static constexpr size_t kMax = 1 << 20;
  cudaStream_t stream = nullptr;
  float* src = nullptr;
  void* lowp = nullptr;
  float* back = nullptr;
};

TEST_F(CudaCasts, AlignedBuffersUseTheVectorPathAndMatchTheHost) {
  for (LowPrecision kind : {LowPrecision::bf16, LowPrecision::fp16})
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{1000}, size_t{65543}, kMax})
      round_trip(n, 0, 0, 1.0f, kind);
}

TEST_F(CudaCasts, MisalignedBuffersAndScalesMatchTheHost) {
  for (LowPrecision kind : {LowPrecision::bf16, LowPrecision::fp16}) {
    round_trip(4099, 4, 0, 1.0f, kind);
    round_trip(4099, 0, 2, 1.0f, kind);
    round_trip(4099, 12, 6, 1.0f, kind);
    round_trip(50000, 0, 0, 1024.0f, kind);    // a loss-scale-like power of two
    round_trip(50000, 16, 16, 0.125f, kind);   // an averaging scale, aligned
    round_trip(50000, 0, 0, 1.0f / 3.0f, kind);  // not a power of two: rounding after scaling
  }
}

TEST_F(CudaCasts, Fp16OverflowBecomesInfinity) {
  const float host[] = {65504.0f, 65519.0f, 65520.0f, 1e5f, -1e5f};
  CUDA_CHECK(cudaMemcpy(src, host, sizeof host, cudaMemcpyHostToDevice));
  kernels::cast_to_lowp(lowp, src, 5, 1.0f, LowPrecision::fp16, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  uint16_t bits[5];
  CUDA_CHECK(cudaMemcpy(bits, lowp, sizeof bits, cudaMemcpyDeviceToHost));
  EXPECT_EQ(bits[0], 0x7BFF);  // the largest finite fp16
  EXPECT_EQ(bits[1], 0x7BFF);  // rounds down below the halfway point
  EXPECT_EQ(bits[2], 0x7C00);  // halfway rounds to even: +inf
  EXPECT_EQ(bits[3], 0x7C00);
  EXPECT_EQ(bits[4], 0xFC00);
}

}  // namespace
}  // namespace bert
