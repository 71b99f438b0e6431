// Check macros for the CUDA runtime and cuBLAS(Lt): a failing call becomes
// bert::Error(Code::backend, "<call> failed: <error string> at file:line"). Kernel launchers
// check CUDA_CHECK(cudaGetLastError()) right after each launch.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

#define CUDA_CHECK(call)                                                                    \
  do {                                                                                      \
    const cudaError_t bert_cuda_err_ = (call);                                              \
    if (bert_cuda_err_ != cudaSuccess)                                                      \
      ::bert::fail(::bert::Code::backend, #call, " failed: ",                               \
                   cudaGetErrorString(bert_cuda_err_), " at ", __FILE__, ":", __LINE__);    \
  } while (0)

#define CUBLAS_CHECK(call)                                                                  \
  do {                                                                                      \
    const cublasStatus_t bert_cublas_st_ = (call);                                          \
    if (bert_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::bert::fail(::bert::Code::backend, #call, " failed: ",                               \
                   cublasGetStatusString(bert_cublas_st_), " at ", __FILE__, ":", __LINE__); \
  } while (0)
