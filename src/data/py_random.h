// Python's `random.Random(n)` for a non-negative integer seed (MT19937 seeded with
// init_by_array over n's 32-bit words) and its `shuffle`, bit-exact, so the per-epoch shard
// order is the one DLE's run_pretraining.py gets from `random.Random(seed + epoch).shuffle(files)`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace bert {

class PyRandom {
 public:
  // The seed is the 128-bit integer hi * 2^64 + lo.
  explicit PyRandom(uint64_t seed_lo, uint64_t seed_hi = 0);

  uint32_t next_u32();             // genrand_uint32
  uint32_t getrandbits(int k);     // 1 <= k <= 32
  uint32_t randbelow(uint32_t n);  // Python's _randbelow_with_getrandbits, n >= 1

  template <typename T>
  void shuffle(std::vector<T>& x) {  // Python's random.shuffle
    for (size_t i = x.size(); i-- > 1;) std::swap(x[i], x[randbelow(static_cast<uint32_t>(i + 1))]);
  }

 private:
  static constexpr int kN = 624;
  uint32_t mt_[kN];
  int index_ = kN;
};

}  // namespace bert
