// The scheduler behind cuda_emu.h: each block's threads are ucontext fibers run round-robin until
// every one of them waits at a barrier or has exited; then the barriers whose participants have
// all arrived are released. Also each block's shared memory, and the seeded random order of
// blocks and threads (BERT_EMU_SCHEDULE_SEED).
#include "cuda_emu.h"

#include "cuda_runtime_emu.h"

#include <ucontext.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace cuda_emu {

ThreadCoords g_coords;

namespace {

constexpr size_t kStackBytes = 128 * 1024;
constexpr size_t kSlotBytes = 16;  // largest value one shuffle moves

enum class Wait { none, block, warp, done };

struct Fiber {
  ucontext_t context;
  char* stack = nullptr;
  uint3 thread_idx;
  Wait wait = Wait::none;
  int shuffles = 0;  // shuffles started, to catch lanes that pair different shuffles
};

// A shared array of the running block: its declaration (site) and where it starts.
struct SharedArray {
  const void* site;
  size_t offset;
};

struct BlockRun {
  const char* kernel = nullptr;
  std::vector<Fiber> fibers;
  std::vector<int> order;  // the order fibers are resumed in, each round
  std::vector<SharedArray> shared_arrays;
  size_t shared_used = 0;
  uint64_t serial = 0;         // blocks run since the program started, this one included
  uint32_t barriers = 0;       // __syncthreads released in this block so far
  std::vector<uint32_t> warp_syncs;  // per warp: shuffles released so far
  ucontext_t scheduler;
  const std::function<void()>* body = nullptr;
  int current = 0;
  // Two generations of shuffle slots: shuffle k writes slots[k % 2], so a lane may start the
  // next shuffle while others still read the previous one.
  std::array<std::vector<std::array<unsigned char, kSlotBytes>>, 2> slots;
  std::string error;
};

BlockRun* g_run = nullptr;
uint64_t g_blocks_run = 0;

// Shared memory: one block's at a time (blocks never run at the same time), filled with 0xFF
// bytes up to what the last block used before the next one starts.
alignas(64) unsigned char g_shared[kSharedMemoryBytes];
size_t g_shared_dirty = kSharedMemoryBytes;

void begin_block_shared_memory(BlockRun& run) {
  std::memset(g_shared, 0xFF, g_shared_dirty);
  g_shared_dirty = 0;
  run.shared_arrays.clear();
  run.shared_used = 0;
}

// The seed of the random order of blocks and threads, if any (BERT_EMU_SCHEDULE_SEED, or
// set_schedule_seed), and the generator it seeds.
std::optional<uint64_t>& schedule_seed() {
  static std::optional<uint64_t> seed = []() -> std::optional<uint64_t> {
    const char* env = std::getenv("BERT_EMU_SCHEDULE_SEED");
    if (env == nullptr || *env == '\0') return std::nullopt;
    return std::strtoull(env, nullptr, 10);
  }();
  return seed;
}
std::mt19937_64& schedule_random() {
  static std::mt19937_64 random(schedule_seed().value_or(0));
  return random;
}

// Fiber stacks, kept from launch to launch (allocating and faulting in up to 1024 of them per
// launch was most of the emulation's time). Not zeroed: a stack needs no initial contents.
char* fiber_stack(int thread) {
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (static_cast<int>(stacks.size()) <= thread)
    stacks.emplace_back(new char[kStackBytes]);
  return stacks[thread].get();
}

Fiber& current_fiber() { return g_run->fibers[g_run->current]; }

void wait_at(Wait wait) {
  Fiber& fiber = current_fiber();
  fiber.wait = wait;
  swapcontext(&fiber.context, &g_run->scheduler);
}

// Stops the block: the scheduler throws once control is back on the caller's stack.
[[noreturn]] void fail_in_fiber(std::string message) {
  g_run->error = std::move(message);
  wait_at(Wait::done);
  std::abort();  // never resumed
}

void fiber_main() {
  (*g_run->body)();
  current_fiber().wait = Wait::done;  // uc_link returns to the scheduler
}

std::string coords(uint3 c) {
  char text[64];
  std::snprintf(text, sizeof text, "(%u,%u,%u)", c.x, c.y, c.z);
  return text;
}

// Releases every complete barrier; returns whether any was released.
bool release_barriers(BlockRun& run, std::string& problem) {
  const int n = static_cast<int>(run.fibers.size());
  int alive = 0, at_block = 0;
  for (const Fiber& f : run.fibers) {
    alive += f.wait != Wait::done;
    at_block += f.wait == Wait::block;
  }
  if (alive > 0 && at_block == alive) {
    for (Fiber& f : run.fibers) f.wait = Wait::none;
    ++run.barriers;
    return true;
  }
  bool released = false;
  for (int first = 0; first < n; first += 32) {
    const int last = std::min(n, first + 32);
    int warp_alive = 0, at_warp = 0, shuffles = -1;
    for (int i = first; i < last; ++i) {
      const Fiber& f = run.fibers[i];
      warp_alive += f.wait != Wait::done;
      if (f.wait != Wait::warp) continue;
      ++at_warp;
      if (shuffles >= 0 && f.shuffles != shuffles)
        problem = "lanes of warp " + std::to_string(first / 32) + " are at different shuffles";
      shuffles = f.shuffles;
    }
    if (at_warp > 0 && at_warp == warp_alive && problem.empty()) {
      for (int i = first; i < last; ++i)
        if (run.fibers[i].wait == Wait::warp) run.fibers[i].wait = Wait::none;
      ++run.warp_syncs[first / 32];
      released = true;
    } else if (at_warp > 0 && problem.empty()) {
      problem = "warp " + std::to_string(first / 32) + ": " + std::to_string(at_warp) + " of " +
                std::to_string(warp_alive) + " live lanes wait at a shuffle, the rest at " +
                "__syncthreads";
    }
  }
  return released;
}

void run_block(BlockRun& run) {
  begin_block_shared_memory(run);
  run.serial = ++g_blocks_run;
  run.barriers = 0;
  std::fill(run.warp_syncs.begin(), run.warp_syncs.end(), 0);
  for (size_t i = 0; i < run.fibers.size(); ++i) {
    Fiber& f = run.fibers[i];
    f.wait = Wait::none;
    f.shuffles = 0;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = &run.scheduler;
    makecontext(&f.context, fiber_main, 0);
  }
  for (;;) {
    if (schedule_seed()) std::shuffle(run.order.begin(), run.order.end(), schedule_random());
    for (int i : run.order) {
      Fiber& f = run.fibers[i];
      if (f.wait != Wait::none) continue;
      run.current = i;
      g_coords.thread_idx = f.thread_idx;
      swapcontext(&run.scheduler, &f.context);
      if (!run.error.empty()) return;
    }
    bool all_done = true;
    for (const Fiber& f : run.fibers) all_done &= f.wait == Wait::done;
    if (all_done) return;
    std::string problem;
    if (!release_barriers(run, problem)) {
      run.error = "deadlock: " + (problem.empty() ? std::string("no barrier can complete") : problem);
      return;
    }
  }
}

}  // namespace

void sync_block() { wait_at(Wait::block); }

void set_schedule_seed(std::optional<uint64_t> seed) {
  schedule_seed() = seed;
  schedule_random().seed(seed.value_or(0));
}

void* shared_slot(const void* site, size_t bytes, size_t align) {
  BlockRun& run = *g_run;
  for (const SharedArray& array : run.shared_arrays)
    if (array.site == site) return g_shared + array.offset;
  const size_t offset = (run.shared_used + align - 1) / align * align;
  if (offset + bytes > kSharedMemoryBytes)
    fail_in_fiber("the block's shared arrays take " + std::to_string(offset + bytes) +
                  " bytes, more than the " + std::to_string(kSharedMemoryBytes) +
                  " bytes of static shared memory a block may have");
  run.shared_arrays.push_back({site, offset});
  run.shared_used = offset + bytes;
  return g_shared + offset;
}

bool running_thread(RunningThread& thread) {
  if (g_run == nullptr) return false;
  const BlockRun& run = *g_run;
  thread.block_serial = run.serial;
  thread.block_rank = static_cast<int64_t>(
      (g_coords.block_idx.z * g_coords.grid_dim.y + g_coords.block_idx.y) * g_coords.grid_dim.x +
      g_coords.block_idx.x);
  thread.thread_rank = run.current;
  thread.barriers = run.barriers;
  thread.warp_syncs = run.warp_syncs[run.current / 32];
  return true;
}

std::string thread_name(int rank) {
  const dim3 b = g_coords.block_dim;
  return "thread " + coords(make_uint3(rank % b.x, rank / b.x % b.y, rank / (b.x * b.y)));
}

void fail_kernel(std::string message) { fail_in_fiber(std::move(message)); }

const unsigned char* shared_memory() { return g_shared; }

void shuffle_xor(const void* value, void* out, size_t bytes, int lane_mask, int width) {
  if (bytes > kSlotBytes || width != 32)
    fail_in_fiber("shuffle of " + std::to_string(bytes) + " bytes, width " +
                  std::to_string(width) + " is not emulated");
  BlockRun& run = *g_run;
  Fiber& fiber = current_fiber();
  const int me = run.current;
  auto& slots = run.slots[fiber.shuffles % 2];
  std::memcpy(slots[me].data(), value, bytes);
  ++fiber.shuffles;
  wait_at(Wait::warp);
  const int source = (me & ~31) | ((me & 31) ^ lane_mask);
  // The source lane took part if it wrote this shuffle's slot (it may have exited since).
  if (source >= static_cast<int>(run.fibers.size()) ||
      run.fibers[source].shuffles < fiber.shuffles)
    fail_in_fiber("thread " + coords(fiber.thread_idx) + " shuffles from lane " + std::to_string(source & 31) +
                  ", which has exited or does not exist");
  std::memcpy(out, slots[source].data(), bytes);
}

void run_grid(const char* kernel, dim3 grid, dim3 block, const std::function<void()>& body) {
  const int threads = static_cast<int>(block.x * block.y * block.z);
  if (threads < 1 || threads > 1024)
    throw std::runtime_error("launch with " + std::to_string(threads) + " threads per block");
  if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 || grid.z > 65535)
    throw std::runtime_error("launch with an invalid grid");
  begin_launch();
  BlockRun run;
  run.kernel = kernel;
  run.body = &body;
  run.fibers.resize(threads);
  run.order.resize(threads);
  std::iota(run.order.begin(), run.order.end(), 0);
  run.warp_syncs.resize((threads + 31) / 32);
  for (auto& generation : run.slots) generation.resize(threads);
  for (int t = 0; t < threads; ++t) {
    Fiber& f = run.fibers[t];
    f.stack = fiber_stack(t);
    f.thread_idx = make_uint3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
  }
  g_run = &run;  // launches never nest: kernels/ launches only from the host
  g_coords.block_dim = block;
  g_coords.grid_dim = grid;
  std::vector<uint3> blocks;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) blocks.push_back(make_uint3(x, y, z));
  if (schedule_seed()) std::shuffle(blocks.begin(), blocks.end(), schedule_random());
  for (const uint3& b : blocks) {
    g_coords.block_idx = b;
    run_block(run);
    g_shared_dirty = run.shared_used;
    if (!run.error.empty()) {
      g_run = nullptr;
      throw std::runtime_error(std::string("kernel ") + kernel + ", block " + coords(b) + ": " + run.error);
    }
  }
  g_run = nullptr;
}

}  // namespace cuda_emu
