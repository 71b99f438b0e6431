// Check macros for the CUDA runtime (CUDA_CHECK, from kernels/launch_check.h) and cuBLAS(Lt):
// a failing call becomes bert::Error(Code::backend, "<call> failed: <error string> at file:line").
// Also check_not_capturing, for what must not happen while a CUDA graph is being recorded.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "core/error.h"
#include "kernels/launch_check.h"  // CUDA_CHECK


#define CUBLAS_CHECK(call)                                                                  \
  do {                                                                                      \
    const cublasStatus_t bert_cublas_st_ = (call);                                          \
    if (bert_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::bert::fail(::bert::Code::backend, #call, " failed: ",                               \
                   cublasGetStatusString(bert_cublas_st_), " at ", __FILE__, ":", __LINE__); \
  } while (0)

namespace bert {

// Refuses (Error(internal)) what must not happen while `stream` captures a CUDA graph: a cache
// miss (a cuBLASLt algorithm query, a cuDNN graph build) or a scratch buffer growing. A recording
// follows a direct run of the same work (Ops::record), which fills the caches and sizes the
// buffers, so a miss means the recorded work differs from the run before it; `what` names it.
template <typename... Parts>
void check_not_capturing(cudaStream_t stream, const Parts&... what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status == cudaStreamCaptureStatusNone) return;
  fail(Code::internal, what..., " while recording a CUDA graph: the recorded work must repeat work run directly "
       "just before it (Ops::record)");
}

}  // namespace bert
