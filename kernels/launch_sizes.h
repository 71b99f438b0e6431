// The launch quantities of kernels/ that decide how many chunks (and partials) a launch makes,
// CUDA-free so that the launchers (the .cu files) and the cost model (src/perf/cost_model_ops.cpp)
// read the same numbers.
#pragma once

#include <cstdint>

namespace bert::kernels {

// Rows per chunk of the fixed-order column sums: column_sum_add (reduce.cu) and
// layernorm_bwd_params (layernorm.cu) each write [chunks, N] double partials.
constexpr int64_t kColumnSumRowsPerChunk = 64;
// Rows per chunk of residual_layernorm_bwd's parameter-gradient partials (layernorm.cu).
constexpr int64_t kResidualLayerNormRowsPerChunk = 32;
// Elements per chunk of a parameter segment in the multi-tensor kernels (reduce.h's SegmentTable).
constexpr int64_t kSegmentChunk = 16384;

// The chunks a segment of `elems` elements makes in the multi-tensor kernels.
constexpr int64_t segment_chunks(int64_t elems) { return (elems + kSegmentChunk - 1) / kSegmentChunk; }
// The chunks of `rows_per_chunk` rows that M rows make (at least one).
constexpr int64_t row_chunks(int64_t M, int64_t rows_per_chunk) {
  return ((M < 1 ? 1 : M) + rows_per_chunk - 1) / rows_per_chunk;
}

}  // namespace bert::kernels
