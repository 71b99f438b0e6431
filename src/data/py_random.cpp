// MT19937 (Matsumoto & Nishimura) with CPython's seeding (init_by_array over the seed's
// little-endian 32-bit words, at least one word) and CPython's rejection-sampled randbelow.
#include "data/py_random.h"

#include <algorithm>
#include <bit>

namespace bert {

PyRandom::PyRandom(uint64_t seed_lo, uint64_t seed_hi) {
  std::vector<uint32_t> key;
  for (uint64_t part : {seed_lo, seed_hi}) {
    key.push_back(static_cast<uint32_t>(part));
    key.push_back(static_cast<uint32_t>(part >> 32));
  }
  while (key.size() > 1 && key.back() == 0) key.pop_back();

  mt_[0] = 19650218u;
  for (int i = 1; i < kN; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  int i = 1;
  size_t j = 0;
  for (size_t k = std::max<size_t>(kN, key.size()); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  index_ = kN;
}

uint32_t PyRandom::next_u32() {
  if (index_ >= kN) {
    for (int k = 0; k < kN; ++k) {
      const uint32_t y = (mt_[k] & 0x80000000u) | (mt_[(k + 1) % kN] & 0x7fffffffu);
      mt_[k] = mt_[(k + 397) % kN] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint32_t PyRandom::getrandbits(int k) { return next_u32() >> (32 - k); }

uint32_t PyRandom::randbelow(uint32_t n) {
  const int k = std::bit_width(n);
  uint32_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

}  // namespace bert
