// Seeded random numbers for bert-prep (xoshiro256** seeded through splitmix64). Everything is
// integer arithmetic defined here, so a seed gives the same shards on every platform and
// standard library, and each shard draws from its own stream (seed, stream id).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/philox.h"

namespace bert {

class PrepRandom {
 public:
  PrepRandom(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1342543DE82EF95ull + 0x9E3779B97F4A7C15ull);
    for (uint64_t& s : state_) s = splitmix(x);
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Uniform double in [0, 1) with 53 random bits (Python's random.random()).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform integer in [0, n), unbiased (Lemire's method); n >= 1.
  uint64_t below(uint64_t n) {
    __uint128_t m = static_cast<__uint128_t>(next()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = -n % n;
      while (low < threshold) {
        m = static_cast<__uint128_t>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Uniform integer in [a, b] (Python's random.randint).
  int64_t randint(int64_t a, int64_t b) { return a + static_cast<int64_t>(below(static_cast<uint64_t>(b - a + 1))); }
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) { return mix64(x += 0x9E3779B97F4A7C15ull); }
  uint64_t state_[4];
};

}  // namespace bert
