// Device memory for the CUDA backend: every allocation (user buffers, scratch, the GEMM
// workspace) goes through DeviceMemory so peak_bytes() is the arena's own accounting.
// Scratch buffers grow on demand and are reused by ops that run in stream order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace bert {

class DeviceMemory {
 public:
  explicit DeviceMemory(cudaStream_t stream) : stream_(stream) {}
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Zero-filled (in stream order); throws Error(out_of_memory) naming the size.
  void* alloc(size_t bytes);
  // Frees a pointer from alloc(); unknown pointers throw Error(invalid_argument).
  void release(void* ptr);
  size_t live_bytes() const;
  size_t peak_bytes() const;
  // How many buffers release() has freed so far: recorded work (CUDA graphs) that holds
  // addresses is valid only while this count stays what it was when the work was recorded.
  uint64_t releases() const;

 private:
  cudaStream_t stream_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
  uint64_t releases_ = 0;
};

// A device buffer that only grows. get(bytes) waits for the stream before replacing a buffer
// that is too small, so kernels still reading the old one finish first.
class ScratchBuffer {
 public:
  ScratchBuffer(DeviceMemory& memory, cudaStream_t stream) : memory_(memory), stream_(stream) {}
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  void* get(size_t bytes);
  template <typename T>
  T* get_as(size_t count) {
    return static_cast<T*>(get(count * sizeof(T)));
  }

 private:
  DeviceMemory& memory_;
  cudaStream_t stream_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace bert
