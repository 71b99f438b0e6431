// Row reductions in kLanes interleaved partials combined in a fixed tree: the compiler can
// vectorise them (no reassociation needed), and the result depends only on the row, never on
// threads or blocking. Included by kernels compiled per instruction set (target_clones).
#pragma once

#include <algorithm>
#include <cmath>

namespace bert {

constexpr int kLanes = 8;

// lane[j mod kLanes] += f(j) for j in [0, n) in order, the last n mod kLanes in lanes 0, 1, ...
template <typename F>
inline void lane_accumulate(double (&lane)[kLanes], int64_t n, F&& f) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += f(j + l);
  }
  for (int l = 0; j < n; ++j, ++l) lane[l] += f(j);
}

// The lanes' total, combined in a fixed tree.
inline double lane_total(double (&lane)[kLanes]) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

// Σ_j f(j) over [0, n) in double.
template <typename F>
inline double lane_sum(int64_t n, F&& f) {
  double lane[kLanes] = {};
  lane_accumulate(lane, n, f);
  return lane_total(lane);
}

// max_j x[j] over [0, n) (-inf when n == 0).
inline float lane_max(const float* x, int64_t n) {
  float lane[kLanes];
  std::fill(lane, lane + kLanes, -INFINITY);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] = std::max(lane[l], x[j + l]);
  }
  for (int l = 0; j < n; ++j, ++l) lane[l] = std::max(lane[l], x[j]);
  return *std::max_element(lane, lane + kLanes);
}

}  // namespace bert
