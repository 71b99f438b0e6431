// The CUDA runtime calls the CUDA backend (src/backend/cuda) makes, on the host, for running it
// in the kernel emulation: one device (reported as compute capability 9.0), host memory as
// device memory, streams that run everything at once in order. Allocations are tracked so the
// cuBLASLt emulation can check that each matrix it touches lies inside one of them.
#include "cuda_runtime_emu.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <map>

namespace cuda_emu {
namespace {

std::map<const char*, size_t>& allocations() {
  static std::map<const char*, size_t> live;
  return live;
}

int g_stream_count = 0;

}  // namespace

bool inside_allocation(const void* first, const void* last) {
  const auto* lo = static_cast<const char*>(first);
  const auto* hi = static_cast<const char*>(last);
  auto it = allocations().upper_bound(lo);
  if (it == allocations().begin()) return false;
  --it;
  return lo >= it->first && hi < it->first + it->second;
}

}  // namespace cuda_emu

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  if (attr == cudaDevAttrComputeCapabilityMajor) *value = 9;
  else if (attr == cudaDevAttrComputeCapabilityMinor) *value = 0;
  else return cudaErrorInvalidValue;  // not emulated: the caller should learn it asked
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  (void)flags;
  // A distinct non-null handle per stream; nothing dereferences it.
  *stream = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(++cuda_emu::g_stream_count));
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  const size_t rounded = (bytes + 255) / 256 * 256;
  *ptr = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (*ptr == nullptr) return cudaErrorMemoryAllocation;
  std::memset(*ptr, 0xcd, rounded);  // device memory starts as garbage, not zeros
  cuda_emu::allocations()[static_cast<const char*>(*ptr)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (cuda_emu::allocations().erase(static_cast<const char*>(ptr)) == 0)
    return cudaErrorInvalidValue;
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t) {
  const bool device_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool device_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (bytes == 0) return cudaSuccess;
  const char* d = static_cast<const char*>(dst);
  const char* s = static_cast<const char*>(src);
  if ((device_dst && !cuda_emu::inside_allocation(d, d + bytes - 1)) ||
      (device_src && !cuda_emu::inside_allocation(s, s + bytes - 1)))
    return cudaErrorInvalidValue;
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) {
  if (bytes == 0) return cudaSuccess;
  const char* p = static_cast<const char*>(ptr);
  if (!cuda_emu::inside_allocation(p, p + bytes - 1)) return cudaErrorInvalidValue;
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

// Launches either ran or threw, so there is never a pending error.
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "emulated CUDA error";
}

}  // extern "C"
