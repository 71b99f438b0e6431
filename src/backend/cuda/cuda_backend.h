// The CUDA backend's C++ entry point beyond ops.h: whether this build has the cuDNN
// fused-attention path.
// Everything else in the backend is reached through the Ops interface (make_cuda_ops).
#pragma once

#include "backend/ops.h"

namespace bert {

// True when the engine was built with cudnn-frontend (CudaOptions::fused_attention works).
bool fused_attention_built();

}  // namespace bert
