// Philox dropout shared by the CPU dropout, residual-block and attention ops. Uniforms are exactly
// philox_uniform_at's (Philox groups of four, one block per group), so a GPU kernel that calls
// philox_uniform_at per element reproduces every mask bit. They are drawn a block of elements
// at a time by a vectorised Philox (cpu_philox.cpp).
#pragma once

#include <cstdint>

#include "backend/ops.h"

namespace bert {

// out[j] = (kept ? in[j] * keep_scale : 0), plus residual[j] when residual is given, for the
// elements first + j (j < n) of site's stream, kept where philox_uniform_at(site, first + j) >= p.
// With p = 0 nothing is drawn. out may alias in. The mask's draw and the select run in one
// vectorised clone (cpu_philox.cpp).
void dropout_apply(float* out, const float* in, const float* residual, const DropoutSite& site, int64_t first,
                   int64_t n);

// dropout_apply (no residual) of the same elements to two arrays, the mask drawn once.
void dropout_apply_pair(float* out_a, const float* in_a, float* out_b, const float* in_b, const DropoutSite& site,
                        int64_t first, int64_t n);

}  // namespace bert
