// Shared helpers for the CPU backend tests: seeded random tensors, central finite differences
// of a scalar function, weighted sums, and a closeness check that reports the worst element.
// Host vectors serve as backend memory (the CPU backend's memory is host memory).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/ops.h"

namespace bert::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::vector<int32_t> random_ints(size_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(gen);
  return v;
}

// Σ a[i]·r[i] in double.
inline double weighted_sum(const std::vector<float>& a, const std::vector<float>& r) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * r[i];
  return s;
}

// Central differences of f with respect to every element of x (x is restored afterwards). The
// step is the one actually taken after rounding x ± h to float.
inline std::vector<double> numeric_grad(std::vector<float>& x, const std::function<double()>& f,
                                        float h) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    const float up = saved + h, down = saved - h;
    x[i] = up;
    const double f_up = f();
    x[i] = down;
    const double f_down = f();
    x[i] = saved;
    g[i] = (f_up - f_down) / (static_cast<double>(up) - static_cast<double>(down));
  }
  return g;
}

// Every |actual - expected| <= atol + rtol·|expected|; reports the worst element.
template <typename A, typename E>
inline void expect_close(const std::vector<A>& actual, const std::vector<E>& expected, double atol,
                         double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double worst = 0.0;
  size_t worst_i = 0;
  bool ok = true;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    const double err = std::abs(a - e);
    const double excess = err - (atol + rtol * std::abs(e));
    if (!(excess <= 0.0)) ok = false;
    if (!(err <= worst)) {
      worst = err;
      worst_i = i;
    }
  }
  EXPECT_TRUE(ok) << what << ": worst element " << worst_i << " actual "
                  << static_cast<double>(actual[worst_i]) << " expected "
                  << static_cast<double>(expected[worst_i]) << " (|error| " << worst << ")";
}

}  // namespace bert::testing
