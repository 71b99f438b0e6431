// Where the fused attention's per-call table lives in its device buffer: [B + 1] int32 each of
// sequence starts, Q/K/V offsets, O offsets and softmax-stats offsets, then the dropout seed and
// offset (one int64 each). cudnn-frontend declares every tensor 16-byte aligned and the backend
// does not check (a misaligned operand gives wrong results on SM90, no error), so every part
// starts on a 16-byte boundary of a buffer that does (cudaMalloc's: 256 bytes). CUDA-free, so the
// CPU tests check it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bert {

struct AttentionTableLayout {
  // Each part's first int32 word from the buffer's start.
  size_t seq_start = 0, off_qkv = 0, off_o = 0, off_stats = 0, seed = 0, offset = 0;
  size_t words = 0;  // the buffer's size in int32 words
};

inline AttentionTableLayout attention_table_layout(int64_t batch) {
  constexpr size_t kAlignWords = 16 / sizeof(int32_t);
  const size_t n = static_cast<size_t>(batch + 1);
  const size_t part = (n + kAlignWords - 1) / kAlignWords * kAlignWords;
  AttentionTableLayout t;
  t.off_qkv = part;
  t.off_o = 2 * part;
  t.off_stats = 3 * part;
  t.seed = 4 * part;
  t.offset = t.seed + kAlignWords;
  t.words = t.offset + kAlignWords;
  return t;
}

}  // namespace bert
