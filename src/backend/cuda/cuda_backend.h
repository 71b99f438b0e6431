// The CUDA backend's public C++ entry points beyond ops.h: the factory with a GEMM precision
// ("fp32", "tf32" or "bf16"; make_cuda_ops(device) uses "tf32") and the precision parser.
// Everything else in the backend is reached through the Ops interface.
#pragma once

#include <memory>
#include <string>

#include "backend/ops.h"

namespace bert {

// How GEMM inputs are fed to the tensor cores; outputs and accumulation are fp32 in all cases.
enum class GemmPrecision { fp32, tf32, bf16 };

// Parses "fp32" | "tf32" | "bf16"; throws Error(invalid_argument) naming the value otherwise.
GemmPrecision parse_gemm_precision(const std::string& precision);

// Ops on CUDA device `device` with GEMMs in `precision`. Throws Error(backend) when the
// device does not exist or cannot be initialised.
std::unique_ptr<Ops> make_cuda_ops(int device, const std::string& precision);

}  // namespace bert
