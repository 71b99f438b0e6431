// ThreadDevice on the CUDA runtime (see backend/thread_device.h).
#include "backend/thread_device.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_check.h"

namespace bert {

ThreadDevice::ThreadDevice(bool gpu, int device) {
  if (!gpu) return;
  if (cudaGetDevice(&saved_) != cudaSuccess) {  // no usable GPU: the session reports that itself
    cudaGetLastError();
    saved_ = -1;
    return;
  }
  if (device >= 0 && device != saved_) CUDA_CHECK(cudaSetDevice(device));
}

ThreadDevice::~ThreadDevice() {
  int current = -1;
  if (saved_ >= 0 && cudaGetDevice(&current) == cudaSuccess && current != saved_) cudaSetDevice(saved_);
}

}  // namespace bert
