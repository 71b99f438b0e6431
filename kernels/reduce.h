// Launchers of kernels/reduce.cu: fixed-order reductions: column sums (bias gradients) and per-
// segment sums of squares.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/act.h"
#include "kernels/launch_sizes.h"

namespace bert::kernels {

// Row chunks of column_sum_add (its partials are [chunks, N] doubles).
int column_sum_chunks(int64_t M);
// out[N] += Σ_rows a[M, N] in a fixed order (double accumulation); a of any activation storage type.
void column_sum_add(float* out, ConstAct a, int64_t M, int N, double* partials, cudaStream_t stream);

// Flattened chunks of a list of parameter segments for the multi-tensor kernels.
// chunk_start [segs + 1]: first chunk of each segment; offset/size per segment.
struct SegmentTable {
  const int64_t* chunk_start = nullptr;
  const int64_t* offset = nullptr;
  const int64_t* size = nullptr;
  const float* value = nullptr;  // per-segment weight decay or update scale
  int segments = 0;
  int64_t chunks = 0;
};

// A SegmentTable's index in one array of 3·S + 1 words: chunk_start [S + 1] | offset [S] |
// size [S] (filled on the host, then copied to the device), for any list of segments with
// .offset and .size (the backend's ParamSegment). Returns the number of chunks.
template <typename Segments>
int64_t fill_segment_words(const Segments& segs, std::vector<int64_t>& words) {
  const size_t S = segs.size();
  words.assign(3 * S + 1, 0);
  int64_t* chunk_start = words.data();
  for (size_t s = 0; s < S; ++s) {
    words[S + 1 + s] = segs[s].offset;
    words[2 * S + 1 + s] = segs[s].size;
    chunk_start[s + 1] = chunk_start[s] + segment_chunks(segs[s].size);
  }
  return chunk_start[S];
}

// The table over a copy of fill_segment_words' array (`words`) and per-segment `values`.
inline SegmentTable segment_table_at(const int64_t* words, const float* values, int segments,
                                     int64_t chunks) {
  SegmentTable table;
  table.chunk_start = words;
  table.offset = words + segments + 1;
  table.size = words + 2 * segments + 1;
  table.value = values;
  table.segments = segments;
  table.chunks = chunks;
  return table;
}

// out[s] = Σ x^2 over segment s: per-chunk partials [chunks] in double, then each segment's
// partials summed in chunk order (deterministic; no atomics).
void segment_sumsq(double* out, const float* x, const SegmentTable& table, double* partials,
                   cudaStream_t stream);
// The second half of such a reduction for `sets` sets of per-chunk partials laid back to back
// ([sets, chunks]): out[k·S + s] = Σ partials[k·chunks + c] over segment s's chunks, in chunk order.
void segment_partials_finish(double* out, const double* partials, const SegmentTable& table, int sets,
                             cudaStream_t stream);

}  // namespace bert::kernels
