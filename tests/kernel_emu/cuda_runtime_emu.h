// What the emulated CUDA runtime (cuda_runtime_emu.cpp) offers the other emulation files: the
// allocation check, stream work (run now, or recorded while the stream captures a graph), and
// the traffic counters (launches, stream waits, transfers and the bytes kernels load and store
// in device memory) that the cost-model test compares against.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace cuda_emu {

// Whether bytes first..last (inclusive) lie inside one live cudaMalloc allocation.
bool inside_allocation(const void* first, const void* last);

// Work on `stream` (a kernel launch, a GEMM, an async copy or memset, its arguments bound by
// value): runs now, or, while `stream` captures (cudaStreamBeginCapture), is appended to the
// graph being captured and runs each time an instance of that graph is launched.
void enqueue(cudaStream_t stream, std::function<void()> work);

// Whether this thread may launch a kernel on `stream`: as on a GPU, not when the stream belongs to
// another device than the thread's current one (the launch then fails: cudaGetLastError returns
// cudaErrorInvalidResourceHandle). BERT_EMU_DEVICES (default 1) sets how many devices there are.
bool launch_allowed(cudaStream_t stream);

// Makes the device unusable as a GPU is after an illegal address or a trap in a kernel: every
// later synchronisation and cudaGetLastError returns `error`, which is never cleared.
void set_sticky_error(cudaError_t error);

// Counters since the program started (read them before and after the calls of interest).
// read/write bytes are per-launch footprints: the distinct 32-byte sectors of device memory a
// kernel loaded, and those it stored, times 32, summed over launches. Kernels contribute only when
// compiled with access hooks (the emu_kernels_counted library); cuBLASLt's contribution is the
// elements its matrix layouts and epilogue pointers describe; copies and memsets their sizes.
struct Traffic {
  int64_t kernel_launches = 0;   // emulated kernels (cuda_emu::run_grid)
  int64_t gemm_launches = 0;     // cublasLtMatmul calls
  int64_t device_copies = 0;     // cudaMemcpyAsync device-to-device and cudaMemsetAsync
  int64_t host_copies = 0;       // cudaMemcpyAsync between host and device
  int64_t stream_syncs = 0;      // cudaStreamSynchronize
  int64_t read_bytes = 0, write_bytes = 0;  // device memory, kernels + GEMMs + device copies
  int64_t host_to_device_bytes = 0, device_to_host_bytes = 0;
};
Traffic& traffic();
// A kernel launch begins: a new footprint epoch.
void begin_launch();
// A kernel's load (write = false) or store of `bytes` bytes at `address` (from the access hooks):
// counted in device allocations, race-checked there and in shared memory (racecheck.h), ignored
// elsewhere (stack, host buffers).
void note_access(const void* address, size_t bytes, bool write);

// The static shared memory a block may have (48 KiB on every GPU the engine builds for), and the
// running block's (cuda_emu.cpp; the same address for every block).
constexpr size_t kSharedMemoryBytes = 48 * 1024;
const unsigned char* shared_memory();

// The kernel thread running now, for the race checks: its block (a serial number over all blocks
// run so far, and its rank in the grid), its rank in the block, and how many __syncthreads its
// block and shuffles its warp have completed.
struct RunningThread {
  uint64_t block_serial;
  int64_t block_rank;
  int thread_rank;
  uint32_t barriers, warp_syncs;
};
// Whether a kernel thread is running (fills `thread` if so).
bool running_thread(RunningThread& thread);
// "thread (x,y,z)" for a rank in the running block.
std::string thread_name(int rank);
// Fails the running launch with `message` (run_grid throws it, naming the kernel and block).
[[noreturn]] void fail_kernel(std::string message);

}  // namespace cuda_emu
