// Launchers of kernels/attention_padding.cu: packed (variable-length) rows to a padded batch and
// back, for the fused (cuDNN) attention's padded graphs on GPUs without its ragged backward.
// Each enqueues its kernels on `stream`, checks the launch and returns without synchronising;
// pointers are device memory, shapes follow src/backend/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/act.h"
#include "kernels/cast.h"

namespace bert::kernels {

// padded [num_seqs, padded_len, width] in `kind` from packed [T, width] (fp32 or `kind`'s own
// 16-bit type; Error(internal) for the other): row s of sequence b is
// round-to-nearest-even(packed[seq_start[b] + s]) (a copy when 16-bit) for s < seq_start[b+1] -
// seq_start[b] (at most padded_len), 0 after. seq_start [num_seqs + 1] is device memory.
void pad_rows_to_lowp(void* padded, ConstAct packed, const int32_t* seq_start, int num_seqs,
                      int64_t padded_len, int width, LowPrecision kind, cudaStream_t stream);
// The inverse: packed[seq_start[b] + s] = padded[b, s] (widened to fp32, or copied) for every s
// below sequence b's length; padded rows after it are not read.
void unpad_rows_from_lowp(Act packed, const void* padded, const int32_t* seq_start, int num_seqs,
                          int64_t padded_len, int width, LowPrecision kind, cudaStream_t stream);

}  // namespace bert::kernels
