// DeviceMemory and ScratchBuffer: cudaMalloc/cudaFree with live/peak byte accounting.
#include "backend/cuda/cuda_memory.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace bert {

DeviceMemory::~DeviceMemory() {
  for (auto& [ptr, bytes] : live_) cudaFree(ptr);
}

void* DeviceMemory::alloc(size_t bytes) {
  void* ptr = nullptr;
  const size_t request = std::max<size_t>(bytes, 1);
  const cudaError_t err = cudaMalloc(&ptr, request);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it
    fail(Code::out_of_memory, "cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorString(err),
         " (", live_bytes(), " bytes already held by this backend)");
  }
  CUDA_CHECK(cudaMemsetAsync(ptr, 0, request, stream_));
  std::lock_guard<std::mutex> lock(mutex_);
  live_[ptr] = request;
  live_bytes_ += request;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return ptr;
}

void DeviceMemory::release(void* ptr) {
  if (ptr == nullptr) return;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    BERT_CHECK(it != live_.end(), Code::invalid_argument, "release: pointer ", ptr,
               " was not allocated by this CUDA backend");
    bytes = it->second;
    live_.erase(it);
    live_bytes_ -= bytes;
    ++releases_;
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  CUDA_CHECK(cudaFree(ptr));
}

size_t DeviceMemory::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_bytes_;
}

uint64_t DeviceMemory::releases() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return releases_;
}

size_t DeviceMemory::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_bytes_;
}

ScratchBuffer::~ScratchBuffer() {
  if (ptr_ != nullptr) {
    cudaStreamSynchronize(stream_);
    try {
      memory_.release(ptr_);
    } catch (const Error&) {
      // Destructors must not throw; the device is being torn down anyway.
    }
  }
}

void* ScratchBuffer::get(size_t bytes) {
  if (bytes <= bytes_ && ptr_ != nullptr) return ptr_;
  check_not_capturing(stream_, "a scratch buffer growing from ", bytes_, " to ", bytes, " bytes");
  // Grow geometrically so slowly increasing requests do not reallocate every call.
  const size_t grown = std::max(bytes, bytes_ + bytes_ / 2);
  if (ptr_ != nullptr) {
    memory_.release(ptr_);  // synchronises the stream first
    ptr_ = nullptr;
    bytes_ = 0;
  }
  ptr_ = memory_.alloc(grown);
  bytes_ = grown;
  return ptr_;
}

}  // namespace bert
