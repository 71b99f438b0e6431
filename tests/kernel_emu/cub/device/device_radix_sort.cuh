// Stand-in for CUB's DeviceRadixSort::SortPairs in the kernel emulation (cuda_emu.h): the same
// contract (a stable ascending sort of (key, value) pairs on the key bits [begin_bit, end_bit),
// signed keys in numeric order, a size query when temp_storage is null) done with
// std::stable_sort on the host, as stream work (a capturing stream records it, as CUB's kernels
// would be). It is CUB's behaviour, not its algorithm, that kernels/ relies on.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "cuda_runtime_emu.h"

namespace cub {

struct DeviceRadixSort {
  template <typename Key, typename Value>
  static cudaError_t SortPairs(void* temp_storage, size_t& temp_storage_bytes, const Key* keys_in,
                               Key* keys_out, const Value* values_in, Value* values_out,
                               int num_items, int begin_bit = 0, int end_bit = sizeof(Key) * 8,
                               cudaStream_t stream = nullptr) {
    if (temp_storage == nullptr) {
      temp_storage_bytes = 256;  // CUB asks for some scratch; the launchers must pass it back
      return cudaSuccess;
    }
    if (begin_bit != 0 || end_bit != static_cast<int>(sizeof(Key) * 8)) return cudaErrorInvalidValue;
    cuda_emu::enqueue(stream, [=] {
      std::vector<int> order(num_items);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys_in[a] < keys_in[b]; });
      for (int i = 0; i < num_items; ++i) {
        keys_out[i] = keys_in[order[i]];
        values_out[i] = values_in[order[i]];
      }
    });
    return cudaSuccess;
  }
};

}  // namespace cub
