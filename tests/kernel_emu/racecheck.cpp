// The race checks of racecheck.h: a shadow record per byte of shared memory (who wrote and read it,
// between which barriers) and per byte of each device allocation a counted kernel touched (which
// block of which launch wrote and read it).
#include "racecheck.h"

#include <string>

#include "cuda_runtime_emu.h"

namespace cuda_emu {
namespace {

// One byte of shared memory in the block `block_serial`: its last writer and last reader (ranks in
// the block; -1 none) and where each access stood in the barrier and warp-shuffle counts.
struct SharedByte {
  uint64_t block_serial = 0;
  int writer = -1, reader = -1;
  bool many_readers = false;
  uint32_t write_barriers = 0, write_warp_syncs = 0;
  uint32_t read_barriers = 0, read_warp_syncs = 0;
};

SharedByte g_shared_shadow[kSharedMemoryBytes];

// Whether an earlier access of thread `rank` at these counts is ordered before the running thread's.
bool ordered(int rank, uint32_t barriers, uint32_t warp_syncs, const RunningThread& now) {
  if (rank == now.thread_rank || barriers != now.barriers) return true;
  return rank / 32 == now.thread_rank / 32 && warp_syncs != now.warp_syncs;
}

[[noreturn]] void shared_race(const char* what, const RunningThread& now, size_t offset, int other) {
  fail_kernel("shared-memory race: " + thread_name(now.thread_rank) + " " + what + " byte " +
              std::to_string(offset) + " of shared memory, which " +
              (other == now.thread_rank ? std::string("another thread") : thread_name(other)) +
              (what[0] == 'r' ? " wrote" : " accessed") +
              ", with no __syncthreads between them");
}

}  // namespace

bool& racecheck_enabled() {
  static bool enabled = true;
  return enabled;
}

void check_shared_access(size_t offset, size_t bytes, bool write) {
  RunningThread now;
  if (!racecheck_enabled() || !running_thread(now)) return;
  for (size_t i = offset; i < offset + bytes && i < kSharedMemoryBytes; ++i) {
    SharedByte& b = g_shared_shadow[i];
    if (b.block_serial != now.block_serial) b = SharedByte{now.block_serial};
    const bool write_ordered = b.writer < 0 || ordered(b.writer, b.write_barriers, b.write_warp_syncs, now);
    if (!write) {
      if (b.writer < 0)
        fail_kernel("uninitialised shared memory: " + thread_name(now.thread_rank) + " reads byte " +
                    std::to_string(i) + " of shared memory, which no thread of its block has written");
      if (!write_ordered) shared_race("reads", now, i, b.writer);
      if (b.reader >= 0 && b.reader != now.thread_rank && b.read_barriers == now.barriers) b.many_readers = true;
      else if (b.reader < 0 || b.read_barriers != now.barriers) b.many_readers = false;
      b.reader = now.thread_rank;
      b.read_barriers = now.barriers;
      b.read_warp_syncs = now.warp_syncs;
      continue;
    }
    if (!write_ordered) shared_race("writes", now, i, b.writer);
    if (b.reader >= 0 && ((b.many_readers && b.read_barriers == now.barriers) || !ordered(b.reader, b.read_barriers, b.read_warp_syncs, now)))
      shared_race("writes", now, i, b.reader);
    b.writer = now.thread_rank;
    b.write_barriers = now.barriers;
    b.write_warp_syncs = now.warp_syncs;
  }
}

void check_device_access(std::vector<DeviceByte>& shadow, size_t allocation_bytes, size_t offset,
                         size_t bytes, bool write, uint32_t launch) {
  RunningThread now;
  if (!racecheck_enabled() || !running_thread(now)) return;
  if (shadow.empty()) shadow.resize(allocation_bytes);
  for (size_t i = offset; i < offset + bytes && i < allocation_bytes; ++i) {
    DeviceByte& b = shadow[i];
    const bool written_by_other = b.write_launch == launch && b.writer != now.block_rank;
    const bool read_by_other = b.read_launch == launch && b.reader != now.block_rank;
    if (written_by_other || (write && read_by_other)) {
      const int64_t other = written_by_other ? b.writer : b.reader;
      fail_kernel("device-memory race: block " + std::to_string(now.block_rank) + " " +
                  (write ? "writes" : "reads") + " byte " + std::to_string(i) +
                  " of an allocation of " + std::to_string(allocation_bytes) + " bytes, which " +
                  (other == kManyBlocks ? std::string("several blocks") : "block " + std::to_string(other)) +
                  (written_by_other ? " wrote" : " read") + " in the same launch");
    }
    if (write) {
      b.write_launch = launch;
      b.writer = now.block_rank;
    } else {
      b.reader = b.read_launch == launch && b.reader != now.block_rank ? kManyBlocks : now.block_rank;
      b.read_launch = launch;
    }
  }
}

}  // namespace cuda_emu
