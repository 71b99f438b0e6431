// Philox dropout helpers shared by the CPU dropout and attention ops. Uniforms are drawn in
// Philox groups of four (one block per group), exactly as philox_uniform_at defines them, so a
// GPU kernel that calls philox_uniform_at per element reproduces every mask bit.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/ops.h"
#include "core/error.h"
#include "core/philox.h"

namespace bert {

// Scale applied to kept elements: 1 / (1 - p), rounded to float once.
inline float dropout_keep_scale(const DropoutSite& site) { return 1.0f / (1.0f - site.p); }

// Calls f(i, u) for every element index i in [begin, end) with u = philox_uniform_at(site, i).
template <typename F>
inline void for_each_dropout_uniform(const DropoutSite& site, int64_t begin, int64_t end, F&& f) {
  int64_t i = begin;
  while (i < end) {
    const uint64_t group = static_cast<uint64_t>(i) >> 2;
    const Philox4 r = philox_block(site.seed, site.step, site.tensor_id, group);
    const int64_t group_end = std::min<int64_t>(end, static_cast<int64_t>(group + 1) * 4);
    for (; i < group_end; ++i) f(i, philox_uniform(r.v[i & 3]));
  }
}

}  // namespace bert
