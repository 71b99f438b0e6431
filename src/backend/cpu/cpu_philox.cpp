// dropout_apply: Philox4x32-10 (core/philox.h) for the 64 groups of one block at once, with the
// counters in structure-of-arrays form so the compiler vectorises the rounds (32x32->64-bit
// multiplies), then the select over the block, compiled for the instruction sets of cpu_isa.h and
// picked at run time (target_clones). The uniforms are philox_uniform_at's, bit for bit.
#include "backend/cpu/cpu_philox.h"

#include <algorithm>

#include "backend/cpu/cpu_isa.h"
#include "core/error.h"
#include "core/philox.h"

namespace bert {
namespace {

// Elements per vectorised draw; blocks start at multiples of it (64 Philox groups each).
constexpr int64_t kDropoutBlock = 256;
constexpr int kGroups = kDropoutBlock / 4;

// u[4g + k] = philox_uniform(philox_block(seed, step, tensor_id, first_group + g).v[k]).
BERT_CPU_CLONES
void philox_block_uniforms(float (&u)[kDropoutBlock], uint64_t seed, uint64_t step, uint32_t tensor_id,
                           uint64_t first_group) {
  uint32_t c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
  for (int g = 0; g < kGroups; ++g) {
    const uint64_t group = first_group + static_cast<uint64_t>(g);
    c0[g] = static_cast<uint32_t>(group);
    c1[g] = static_cast<uint32_t>(group >> 32);
    c2[g] = tensor_id;
    c3[g] = static_cast<uint32_t>(step);
  }
  uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    for (int g = 0; g < kGroups; ++g) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0[g];
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2[g];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[g] ^ key0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[g] ^ key1;
      c1[g] = static_cast<uint32_t>(p1);
      c3[g] = static_cast<uint32_t>(p0);
      c0[g] = n0;
      c2[g] = n2;
    }
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  for (int g = 0; g < kGroups; ++g) {
    u[4 * g] = philox_uniform(c0[g]);
    u[4 * g + 1] = philox_uniform(c1[g]);
    u[4 * g + 2] = philox_uniform(c2[g]);
    u[4 * g + 3] = philox_uniform(c3[g]);
  }
}

// One block's part [j0, j1) of dropout_apply, u[j - j0] the uniform of element j. Without
// contraction: the residual's add stays a separate rounding, as in the GPU's kernels.
BERT_CPU_CLONES_EXACT
void apply_block(float* out, const float* in, const float* residual, const float* u, int64_t j0, int64_t j1,
                 float p, float keep_scale) {
  if (residual == nullptr) {
    for (int64_t j = j0; j < j1; ++j) out[j] = u[j - j0] >= p ? in[j] * keep_scale : 0.0f;
    return;
  }
  for (int64_t j = j0; j < j1; ++j) out[j] = (u[j - j0] >= p ? in[j] * keep_scale : 0.0f) + residual[j];
}

// dropout_apply with p = 0: out = in (+ residual), no draw.
BERT_CPU_CLONES
void keep_all(float* out, const float* in, const float* residual, int64_t n) {
  if (residual == nullptr) {
    if (out != in) std::copy(in, in + n, out);
    return;
  }
  for (int64_t j = 0; j < n; ++j) out[j] = in[j] + residual[j];
}

// Calls f(u, j0, j1) for each Philox block met by the elements first + j, j in [0, n): u[j - j0]
// is the uniform of element first + j for j in [j0, j1).
template <typename F>
void for_each_block(const DropoutSite& site, int64_t first, int64_t n, F&& f) {
  BERT_CHECK(first >= 0 && n >= 0, Code::internal, "dropout: elements [", first, ", ", first + n, ")");
  float all[kDropoutBlock];
  for (int64_t j = 0; j < n;) {
    const int64_t i = first + j, block = i / kDropoutBlock;
    const int64_t block_end = std::min(first + n, (block + 1) * kDropoutBlock);
    philox_block_uniforms(all, site.seed, site.step, site.tensor_id, static_cast<uint64_t>(block) * kGroups);
    f(all + (i - block * kDropoutBlock), j, j + block_end - i);
    j += block_end - i;
  }
}

}  // namespace

void dropout_apply(float* out, const float* in, const float* residual, const DropoutSite& site, int64_t first,
                   int64_t n) {
  if (site.p == 0.0f) return keep_all(out, in, residual, n);
  const float keep_scale = dropout_keep_scale(site);
  for_each_block(site, first, n, [&](const float* u, int64_t j0, int64_t j1) {
    apply_block(out, in, residual, u, j0, j1, site.p, keep_scale);
  });
}

void dropout_apply_pair(float* out_a, const float* in_a, float* out_b, const float* in_b, const DropoutSite& site,
                        int64_t first, int64_t n) {
  if (site.p == 0.0f) {
    keep_all(out_a, in_a, nullptr, n);
    return keep_all(out_b, in_b, nullptr, n);
  }
  const float keep_scale = dropout_keep_scale(site);
  for_each_block(site, first, n, [&](const float* u, int64_t j0, int64_t j1) {
    apply_block(out_a, in_a, nullptr, u, j0, j1, site.p, keep_scale);
    apply_block(out_b, in_b, nullptr, u, j0, j1, site.p, keep_scale);
  });
}

}  // namespace bert
