// A CPU emulation of the CUDA execution model, so the kernels in kernels/ can be run and checked
// against the CPU backend on machines without a GPU. It is force-included (-include) in front of
// each kernels/*.cu after rewrite_launches.py turned `k<<<grid, block, smem, stream>>>(args)` into
// `::cuda_emu::Launcher(grid, block, smem, stream).bind([](auto&&... a) { k(a...); })(args)`.
//
// Blocks run one after another; the threads of a block run as cooperative fibers (ucontext), so
// __syncthreads() and __shfl_xor_sync() are real barriers: a fiber waits until every live thread
// of its block (or warp) arrives. A barrier that can never complete (threads of one warp waiting
// at different barriers, a shuffle that reads an exited lane) fails the launch with a message.
// Each block gets its own shared memory (48 KiB, filled with 0xFF bytes, NaN as floats, when the
// block starts), so a kernel that reads shared memory it did not write reads NaN, not the last
// block's data. BERT_EMU_SCHEDULE_SEED=<n> runs the blocks of a launch in a seeded random order
// and resumes a block's threads in a random order every round, so a result that depends on the
// order of blocks or of threads between barriers changes. Kernels compiled with access hooks
// (emu_kernels_counted) are also race-checked (racecheck.h). It checks what kernels compute and
// how threads cooperate, not timing or memory coalescing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <type_traits>

#include "cuda_runtime_emu.h"

// Execution-space keywords mean nothing on the host; `__shared__` declarations were rewritten
// into block_shared() calls by rewrite_launches.py, so the keyword is left undefined.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace cuda_emu {

// The running thread's coordinates (set by the scheduler before each fiber resumes).
struct ThreadCoords {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
};
extern ThreadCoords g_coords;

// Barrier of all live threads of the block.
void sync_block();
// Exchanges `bytes` bytes of `value` across the calling warp: returns, in `out`, the value that
// lane (own lane ^ lane_mask) contributed. Every live lane of the warp must call it.
void shuffle_xor(const void* value, void* out, size_t bytes, int lane_mask, int width);

// Runs body() once per thread of every block of the grid; `kernel` names it in errors.
void run_grid(const char* kernel, dim3 grid, dim3 block, const std::function<void()>& body);

// Runs later launches' blocks and threads in a random order from `seed` (nullopt: in order),
// as BERT_EMU_SCHEDULE_SEED does for a whole program.
void set_schedule_seed(std::optional<uint64_t> seed);

// The running block's shared array declared at `site` (a static of the declaring function, so
// each declaration and each template instance has its own): placed in the block's shared memory
// by the first thread that reaches it, the same memory for the block's other threads.
void* shared_slot(const void* site, size_t bytes, size_t align);
template <typename Array>
Array& block_shared(const void* site) {
  return *static_cast<Array*>(shared_slot(site, sizeof(Array), alignof(Array)));
}

struct Launcher {
  const char* kernel;
  dim3 grid, block;
  cudaStream_t stream;
  Launcher(const char* name, dim3 g, dim3 b, size_t shared_bytes = 0, cudaStream_t s = nullptr)
      : kernel(name), grid(g), block(b), stream(s) {
    (void)shared_bytes;  // no kernel of kernels/ declares dynamic shared memory
  }
  // kernel: a callable that calls the kernel with its arguments. The arguments are copied, as
  // a launch does, so a launch recorded into a graph replays with the values it was given.
  template <typename Kernel>
  auto bind(Kernel kernel) const {
    return [kernel, name = this->kernel, grid = grid, block = block, stream = stream](auto&&... args) {
      if (!launch_allowed(stream)) return;
      enqueue(stream, [kernel, name, grid, block, ... a = std::decay_t<decltype(args)>(args)] {
        run_grid(name, grid, block, [&] { kernel(a...); });
      });
    };
  }
};

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::g_coords.thread_idx)
#define blockIdx (::cuda_emu::g_coords.block_idx)
#define blockDim (::cuda_emu::g_coords.block_dim)
#define gridDim (::cuda_emu::g_coords.grid_dim)

inline void __syncthreads() { cuda_emu::sync_block(); }

template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  (void)mask;
  T out;
  cuda_emu::shuffle_xor(&value, &out, sizeof(T), lane_mask, width);
  return out;
}

// Device math the kernels use, with the host's IEEE single-precision operations.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

// CUDA's min/max overloads for mixed integer types and floats (fmin/fmax semantics).
template <typename A, typename B>
inline auto min(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return static_cast<C>(std::fmin(C(a), C(b)));
  else return C(a) < C(b) ? C(a) : C(b);
}
template <typename A, typename B>
inline auto max(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return static_cast<C>(std::fmax(C(a), C(b)));
  else return C(a) < C(b) ? C(b) : C(a);
}
