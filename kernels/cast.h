// Launchers of kernels/cast.cu: fp32 <-> bf16/fp16 casts. Fp32 <-> 16-bit (GEMM inputs, fused
// attention I/O, gradient wire format).
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"

namespace bert::kernels {

enum class LowPrecision { bf16, fp16 };
// The activation storage type of a 16-bit format.
inline DType storage_type(LowPrecision kind) { return kind == LowPrecision::bf16 ? DType::bf16 : DType::f16; }
// dst (bf16/fp16 bits) = round-to-nearest-even(src[i] * scale), n elements
void cast_to_lowp(void* dst, const float* src, int64_t n, float scale, LowPrecision kind, cudaStream_t stream);
// dst[i] = float(src[i]) * scale
void cast_from_lowp(float* dst, const void* src, int64_t n, float scale, LowPrecision kind, cudaStream_t stream);

}  // namespace bert::kernels
