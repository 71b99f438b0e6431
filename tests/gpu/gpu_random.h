// Seeded normal random tensors shared by the GPU test programs (both backends get the same data).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace bert::testing {

inline std::vector<float> randn(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace bert::testing
