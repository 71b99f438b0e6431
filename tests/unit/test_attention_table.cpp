// The fused attention's device table (src/backend/cuda/attention_table.h): every part cuDNN reads
// (sequence starts, ragged offsets, dropout seed and offset) starts on 16 bytes, as cudnn-frontend
// declares its tensors, and no part overlaps another, for batches of 1 to 300 sequences. (The
// table before: parts packed back to back at B + 1 words, so for B = 2 the Q/K/V offsets sat 12
// bytes in, and the dropout offset 8 bytes after the seed.)
#include <gtest/gtest.h>

#include "backend/cuda/attention_table.h"

namespace bert {
namespace {

TEST(AttentionTable, EveryPartStartsOn16BytesAndNoneOverlaps) {
  for (int64_t batch = 1; batch <= 300; ++batch) {
    const AttentionTableLayout t = attention_table_layout(batch);
    const size_t n = static_cast<size_t>(batch + 1);
    const size_t parts[] = {t.seq_start, t.off_qkv, t.off_o, t.off_stats, t.seed, t.offset};
    for (size_t word : parts) EXPECT_EQ(word * sizeof(int32_t) % 16, 0u) << "batch " << batch << ", word " << word;
    // [B + 1] int32 each, then an int64 seed and an int64 offset, in this order, inside the buffer.
    EXPECT_LE(t.seq_start + n, t.off_qkv) << batch;
    EXPECT_LE(t.off_qkv + n, t.off_o) << batch;
    EXPECT_LE(t.off_o + n, t.off_stats) << batch;
    EXPECT_LE(t.off_stats + n, t.seed) << batch;
    EXPECT_LE(t.seed + 2, t.offset) << batch;
    EXPECT_LE(t.offset + 2, t.words) << batch;
  }
}

}  // namespace
}  // namespace bert
