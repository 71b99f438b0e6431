// The CUDA backend's C++ entry points beyond ops.h: the GEMM precision ("fp32", "tf32", "bf16",
// "fp16") and its parser, and whether this build has the cuDNN fused-attention path.
// Everything else in the backend is reached through the Ops interface (make_cuda_ops).
#pragma once

#include <string>

#include "backend/ops.h"

namespace bert {

// How GEMM inputs are fed to the tensor cores; outputs and accumulation are fp32 in all cases.
enum class GemmPrecision { fp32, tf32, bf16, fp16 };

// Parses "fp32" | "tf32" | "bf16" | "fp16"; throws Error(invalid_argument) naming the value.
GemmPrecision parse_gemm_precision(const std::string& precision);
const char* gemm_precision_name(GemmPrecision precision);

// True when the engine was built with cudnn-frontend (CudaOptions::fused_attention works).
bool fused_attention_built();

}  // namespace bert
