// ThreadDevice on CUDA (see backend/thread_device.h): the thread's context saved and restored
// with the driver's cuCtxGetCurrent / cuCtxSetCurrent, looked up through the runtime (the engine
// does not link the driver library itself, so a CUDA build still runs CPU sessions without one).
#include "backend/thread_device.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

namespace bert {
namespace {

struct ContextCalls {
  CUresult (*get)(CUcontext*) = nullptr;
  CUresult (*set)(CUcontext) = nullptr;
};

// Null members where the driver is missing (no GPU): the session then reports that itself.
const ContextCalls& context_calls() {
  static const ContextCalls calls = [] {
    ContextCalls c;
    auto find = [](const char* symbol) -> void* {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, 4000, cudaEnableDefault, &found);
      if (err != cudaSuccess) cudaGetLastError();
      return err == cudaSuccess && found == cudaDriverEntryPointSuccess ? fn : nullptr;
    };
    c.get = reinterpret_cast<CUresult (*)(CUcontext*)>(find("cuCtxGetCurrent"));
    c.set = reinterpret_cast<CUresult (*)(CUcontext)>(find("cuCtxSetCurrent"));
    return c;
  }();
  return calls;
}

}  // namespace

ThreadDevice::ThreadDevice(bool gpu, int device) {
  const ContextCalls& calls = context_calls();
  CUcontext context = nullptr;
  if (!gpu || calls.get == nullptr || calls.set == nullptr || calls.get(&context) != CUDA_SUCCESS) return;
  saved_ = true;
  context_ = context;
  if (device < 0) return;
  const cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    calls.set(context);
    saved_ = false;
    fail(Code::backend, "making GPU ", device, " current on the calling thread failed: ", cudaGetErrorString(err));
  }
}

ThreadDevice::~ThreadDevice() {
  if (saved_) context_calls().set(static_cast<CUcontext>(context_));
}

}  // namespace bert
