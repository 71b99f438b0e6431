// Launchers of kernels/rows.cu: row gathers (the heads' masked rows), a row broadcast (a bias as a
// GEMM's C) and deterministic scatter-adds (embedding gradients).
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"

namespace bert::kernels {

// out and in of one activation storage type.
void gather_rows(Act out, ConstAct in, const int32_t* rows, int64_t n, int H, cudaStream_t stream);
// out[i * ld + j] = row[j] for i < m, j < n; out and row of one storage type.
void broadcast_row(Act out, ConstAct row, int64_t m, int n, int64_t ld, cudaStream_t stream);
// Bytes of scratch scatter_add_rows needs for n rows.
size_t scatter_add_scratch_bytes(int64_t n);
// dst[rows[i]] += src[i]: rows are stably sorted, and each distinct row is summed by one block
// in increasing i, starting from dst's value (the CPU's order, so results are bitwise equal), in
// fp32; dst and src may differ in storage type (16-bit activation rows into fp32 gradients).
void scatter_add_rows(Act dst, ConstAct src, const int32_t* rows, int64_t n, int H, void* scratch,
                      size_t scratch_bytes, cudaStream_t stream);

}  // namespace bert::kernels
