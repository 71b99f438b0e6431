// CUDA_CHECK: a failing CUDA runtime call becomes bert::Error(Code::backend, "<call> failed:
// <error string> at file:line"). Kernel launchers check CUDA_CHECK(cudaGetLastError()) right
// after each launch; the CUDA backend uses it for every runtime call.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

#define CUDA_CHECK(call)                                                                    \
  do {                                                                                      \
    const cudaError_t bert_cuda_err_ = (call);                                              \
    if (bert_cuda_err_ != cudaSuccess)                                                      \
      ::bert::fail(::bert::Code::backend, #call, " failed: ",                               \
                   cudaGetErrorString(bert_cuda_err_), " at ", __FILE__, ":", __LINE__);    \
  } while (0)
