// dropout_uniforms: Philox4x32-10 (core/philox.h) for the 64 groups of one block at once, with
// the counters in structure-of-arrays form so the compiler vectorises the rounds (32x32->64-bit
// multiplies), compiled for the instruction sets of cpu_isa.h and picked at run time
// (target_clones). The uniforms are philox_uniform_at's, bit for bit.
#include "backend/cpu/cpu_philox.h"

#include <algorithm>

#include "backend/cpu/cpu_isa.h"
#include "core/error.h"
#include "core/philox.h"

namespace bert {
namespace {

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

}  // namespace

void dropout_uniforms(float* u, const DropoutSite& site, int64_t begin, int64_t end) {
  const int64_t block = begin / kDropoutBlock;
  BERT_CHECK(begin >= 0 && begin <= end && end <= (block + 1) * kDropoutBlock, Code::internal,
             "dropout_uniforms: [", begin, ", ", end, ") is not inside one block");
  float all[kDropoutBlock];
  philox_block_uniforms(all, site.seed, site.step, site.tensor_id, static_cast<uint64_t>(block) * kGroups);
  std::copy(all + (begin - block * kDropoutBlock), all + (end - block * kDropoutBlock), u);
}

}  // namespace bert
