// Race checks of the kernel emulation, over the loads and stores the access hooks report (kernels
// compiled with them: emu_kernels_counted). A kernel fails its launch, naming the threads or
// blocks and the offset, when
// - shared memory: a thread reads bytes no thread of its block has written since the block
//   started (uninitialised), or two threads of a block access the same bytes, at least one
//   writing, with no __syncthreads between them (nor a shuffle of their warp, for two lanes of
//   one warp);
// - device memory: two blocks of one launch access the same bytes, at least one writing (kernels/
//   uses no atomics, so blocks must never share an output or read another's).
// compute-sanitizer's racecheck does the first on a GPU; the emulator runs blocks and threads in
// an order of its own, so a race would otherwise go unseen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cuda_emu {

// Whether accesses are checked (on unless a test turns it off to show what a race computes).
bool& racecheck_enabled();

// A shared-memory access of the running kernel thread, `offset` bytes into the block's shared memory.
void check_shared_access(size_t offset, size_t bytes, bool write);

// Per byte of a device allocation: the launch and block that last wrote it, and that last read it
// (kManyBlocks when several blocks of that launch did).
struct DeviceByte {
  uint32_t write_launch = 0, read_launch = 0;
  int64_t writer = 0, reader = 0;
};
constexpr int64_t kManyBlocks = -1;
// A device-memory access of the running kernel thread to bytes [offset, offset + bytes) of an
// allocation whose shadow is `shadow` (sized to the allocation), in launch number `launch`.
void check_device_access(std::vector<DeviceByte>& shadow, size_t allocation_bytes, size_t offset,
                         size_t bytes, bool write, uint32_t launch);

}  // namespace cuda_emu
