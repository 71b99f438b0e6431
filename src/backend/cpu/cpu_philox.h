// Philox dropout helpers shared by the CPU dropout and attention ops. Uniforms are exactly
// philox_uniform_at's (Philox groups of four, one block per group), so a GPU kernel that calls
// philox_uniform_at per element reproduces every mask bit. They are drawn a block of elements
// at a time by a vectorised Philox (cpu_philox.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/ops.h"

namespace bert {

// Elements per vectorised draw; blocks start at multiples of it (64 Philox groups each).
constexpr int64_t kDropoutBlock = 256;

// u[i - begin] = philox_uniform_at(site, i) for i in [begin, end), both inside one block
// [k·kDropoutBlock, (k+1)·kDropoutBlock].
void dropout_uniforms(float* u, const DropoutSite& site, int64_t begin, int64_t end);

// Calls f(i, u) for every element index i in [begin, end) with u = philox_uniform_at(site, i).
template <typename F>
inline void for_each_dropout_uniform(const DropoutSite& site, int64_t begin, int64_t end, F&& f) {
  float u[kDropoutBlock];
  int64_t i = begin;
  while (i < end) {
    const int64_t block_end = std::min(end, (i / kDropoutBlock + 1) * kDropoutBlock);
    dropout_uniforms(u, site, i, block_end);
    for (int64_t j = i; j < block_end; ++j) f(j, u[j - i]);
    i = block_end;
  }
}

}  // namespace bert
