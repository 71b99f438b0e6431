// Counter-based Philox4x32-10 random numbers, identical on CPU and GPU.
// Dropout and initialisation draw from (seed, step, tensor id, element index), so any backend
// reproduces the same mask for the same element without sharing state or sequences.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace bert {

struct Philox4 {
  uint32_t v[4];
};

BERT_HD uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
BERT_HD Philox4 philox4x32_10(Philox4 ctr, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = philox_mulhilo(0xD2511F53u, ctr.v[0], &hi0);
    uint32_t lo1 = philox_mulhilo(0xCD9E8D57u, ctr.v[2], &hi1);
    Philox4 next = {{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    ctr = next;
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  return ctr;
}

// Four random words for element group `index / 4` of stream (seed, step, tensor_id).
BERT_HD Philox4 philox_block(uint64_t seed, uint64_t step, uint32_t tensor_id, uint64_t group) {
  Philox4 ctr = {{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), tensor_id,
                  static_cast<uint32_t>(step)}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform float in [0, 1) with 24 random bits.
BERT_HD float philox_uniform(uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }

// Uniform for one element of a stream.
BERT_HD float philox_uniform_at(uint64_t seed, uint64_t step, uint32_t tensor_id, uint64_t index) {
  Philox4 r = philox_block(seed, step, tensor_id, index >> 2);
  return philox_uniform(r.v[index & 3]);
}

// 64-bit mixer (splitmix64's finaliser).
BERT_HD uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One 64-bit seed per stream (seed, step, tensor_id), for generators keyed by a seed alone
// (cuDNN's fused attention dropout): independent streams per dropout site and step.
BERT_HD uint64_t folded_seed(uint64_t seed, uint64_t step, uint32_t tensor_id) {
  return mix64(seed ^ mix64(step ^ mix64(tensor_id)));
}

}  // namespace bert
