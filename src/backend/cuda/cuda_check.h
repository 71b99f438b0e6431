// Check macros for the CUDA runtime (CUDA_CHECK, from kernels/launch_check.h) and cuBLAS(Lt):
// a failing call becomes bert::Error(Code::backend, "<call> failed: <error string> at file:line").
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
