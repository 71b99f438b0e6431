// Sample order within a shard: Philox-driven Fisher-Yates (our own, since std::shuffle and
// std::uniform_int_distribution differ between standard libraries), strides, length buckets.
#include "data/sample_order.h"

#include <algorithm>
#include <numeric>

#include "core/philox.h"

namespace bert {
namespace {

// Consecutive 32-bit words of the Philox stream (seed, epoch, file).
class WordStream {
 public:
  WordStream(uint64_t seed, uint64_t epoch, uint32_t file) : seed_(seed), epoch_(epoch), file_(file) {}
  uint32_t next() {
    if (k_ % 4 == 0) block_ = philox_block(seed_, epoch_, file_, k_ / 4);
    return block_.v[k_++ % 4];
  }
  // Uniform in [0, m), m >= 1, without modulo bias (Lemire's multiply-and-reject).
  uint32_t below(uint32_t m) {
    uint64_t prod = static_cast<uint64_t>(next()) * m;
    uint32_t low = static_cast<uint32_t>(prod);
    if (low < m) {
      const uint32_t threshold = static_cast<uint32_t>(-m) % m;
      while (low < threshold) {
        prod = static_cast<uint64_t>(next()) * m;
        low = static_cast<uint32_t>(prod);
      }
    }
    return static_cast<uint32_t>(prod >> 32);
  }

 private:
  uint64_t seed_, epoch_;
  uint32_t file_;
  uint64_t k_ = 0;
  Philox4 block_{};
};

}  // namespace

std::vector<uint32_t> shuffled_indices(uint32_t n, uint64_t seed, uint64_t epoch, uint32_t file) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  WordStream rng(seed, epoch, file);
  for (uint32_t i = n; i-- > 1;) std::swap(order[i], order[rng.below(i + 1)]);
  return order;
}

int length_bin(int length, int bins, int max_seq_length) {
  const int64_t bin = static_cast<int64_t>(length - 1) * bins / max_seq_length;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(bin, 0), bins - 1));
}

std::vector<uint32_t> sample_order(const ShardSamples& samples, const ShardSlot& slot, uint64_t epoch,
                                   const OrderSpec& spec) {
  const uint32_t n = static_cast<uint32_t>(samples.size());
  std::vector<uint32_t> order;
  if (spec.shuffle) {
    order = shuffled_indices(n, spec.seed, epoch, slot.file);
  } else {
    order.resize(n);
    std::iota(order.begin(), order.end(), 0u);
  }
  if (slot.stride > 1) {
    std::vector<uint32_t> mine;
    for (uint32_t j = slot.offset; j < n; j += slot.stride) mine.push_back(order[j]);
    order.swap(mine);
  }
  if (spec.bucket_bins <= 0) return order;

  const size_t B = static_cast<size_t>(spec.batch_size);
  std::vector<std::vector<uint32_t>> open(static_cast<size_t>(spec.bucket_bins));
  std::vector<uint32_t> out;
  out.reserve(order.size());
  for (uint32_t i : order) {
    auto& group = open[static_cast<size_t>(length_bin(samples.length(i), spec.bucket_bins, spec.max_seq_length))];
    group.push_back(i);
    if (group.size() == B) {
      out.insert(out.end(), group.begin(), group.end());
      group.clear();
    }
  }
  for (const auto& group : open) out.insert(out.end(), group.begin(), group.end());
  out.resize(out.size() / B * B);
  return out;
}

}  // namespace bert
