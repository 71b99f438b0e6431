// CPU backend memory and row-gather ops: zero-filled aligned allocations, peak-bytes
// accounting, allocation failures and bad releases, copies; embedding lookup/backward and
// gather/scatter-add rows against naive loops, including repeated ids and thread-count invariance.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"
#include "test_cpu_ops_common.h"

namespace bert {
namespace {

using testing::random_floats;
using testing::random_ints;

TEST(CpuMemory, AllocIsZeroFilledAndAligned) {
  auto ops = make_cpu_ops(2);
  EXPECT_EQ(ops->name(), "cpu");
  auto* p = static_cast<unsigned char*>(ops->alloc(1000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0) << "byte " << i;
  ops->release(p);
}

TEST(CpuMemory, PeakBytesTracksHighWaterMark) {
  auto ops = make_cpu_ops(1);
  EXPECT_EQ(ops->peak_bytes(), 0u);
  void* a = ops->alloc(1000);
  void* b = ops->alloc(3000);
  EXPECT_EQ(ops->peak_bytes(), 4000u);
  ops->release(a);
  void* c = ops->alloc(2500);  // live 5500
  EXPECT_EQ(ops->peak_bytes(), 5500u);
  ops->release(b);
  ops->release(c);
  void* d = ops->alloc(100);
  EXPECT_EQ(ops->peak_bytes(), 5500u);
  ops->release(d);
}

TEST(CpuMemory, HugeAllocThrowsOutOfMemory) {
  auto ops = make_cpu_ops(1);
  const size_t huge = std::numeric_limits<size_t>::max() / 4;
  try {
    ops->alloc(huge);
    FAIL() << "alloc of " << huge << " bytes succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::out_of_memory);
    EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
  }
  EXPECT_EQ(ops->peak_bytes(), 0u);
}

TEST(CpuMemory, ReleaseOfForeignPointerThrows) {
  auto ops = make_cpu_ops(1);
  float local = 0.0f;
  try {
    ops->release(&local);
    FAIL() << "release of a foreign pointer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("did not allocate"), std::string::npos) << e.what();
  }
  void* p = ops->alloc(64);
  ops->release(p);
  EXPECT_THROW(ops->release(p), Error);
  ops->release(nullptr);
}

TEST(CpuMemory, UploadDownloadCopyFillZero) {
  auto ops = make_cpu_ops(2);
  const std::vector<float> host = random_floats(257, 1);
  const size_t bytes = host.size() * sizeof(float);
  auto* a = static_cast<float*>(ops->alloc(bytes));
  auto* b = static_cast<float*>(ops->alloc(bytes));
  ops->upload(a, host.data(), bytes);
  ops->copy(b, a, bytes);
  std::vector<float> back(host.size(), -1.0f);
  ops->download(back.data(), b, bytes);
  EXPECT_EQ(back, host);
  ops->fill_zero(b + 1, 100 * sizeof(float));
  ops->synchronize();
  ops->download(back.data(), b, bytes);
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i], (i >= 1 && i <= 100) ? 0.0f : host[i]) << "element " << i;
  }
  ops->release(a);
  ops->release(b);
}

TEST(CpuMemory, LargeFillZeroClearsExactlyItsBytes) {
  auto ops = make_cpu_ops(2);
  // 32 MiB + 23 bytes from an odd address: the parallel, streaming path with an unaligned head
  // and tail in its first and last chunk.
  const size_t bytes = (size_t{1} << 25) + 23, before = 3, after = 70;
  std::vector<unsigned char> x(before + bytes + after, 0xAB);
  ops->fill_zero(x.data() + before, bytes);
  ops->synchronize();
  size_t nonzero = 0, changed_outside = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (i >= before && i < before + bytes) nonzero += x[i] != 0;
    else changed_outside += x[i] != 0xAB;
  }
  EXPECT_EQ(nonzero, 0u);
  EXPECT_EQ(changed_outside, 0u);
}

struct EmbeddingCase {
  static constexpr int kVocab = 11, kPositions = 9, kTypes = 2, kTokens = 23, kHidden = 13;
  std::vector<int32_t> word = random_ints(kTokens, 10, 0, kVocab - 1);
  std::vector<int32_t> pos = random_ints(kTokens, 11, 0, kPositions - 1);
  std::vector<int32_t> type = random_ints(kTokens, 12, 0, kTypes - 1);
  std::vector<float> word_emb = random_floats(kVocab * kHidden, 13);
  std::vector<float> pos_emb = random_floats(kPositions * kHidden, 14);
  std::vector<float> type_emb = random_floats(kTypes * kHidden, 15);
  EmbeddingCase() { word[3] = word[7] = word[19] = 4; }  // repeated ids must accumulate
};

TEST(CpuEmbedding, ForwardMatchesLoop) {
  auto ops = make_cpu_ops(2);
  EmbeddingCase c;
  const int H = EmbeddingCase::kHidden, T = EmbeddingCase::kTokens;
  std::vector<float> out(T * H);
  ops->embedding_fwd({out.data(), c.word.data(), c.pos.data(), c.type.data(), c.word_emb.data(),
                      c.pos_emb.data(), c.type_emb.data(), T, H});
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < H; ++j) {
      const float expected =
          c.word_emb[c.word[t] * H + j] + c.pos_emb[c.pos[t] * H + j] + c.type_emb[c.type[t] * H + j];
      ASSERT_EQ(out[t * H + j], expected) << "token " << t << " column " << j;
    }
  }
}

TEST(CpuEmbedding, BackwardAccumulatesInTokenOrder) {
  EmbeddingCase c;
  const int H = EmbeddingCase::kHidden, T = EmbeddingCase::kTokens;
  const std::vector<float> dout = random_floats(T * H, 16);
  std::vector<float> dword0 = random_floats(c.word_emb.size(), 17);
  std::vector<float> dpos0 = random_floats(c.pos_emb.size(), 18);
  std::vector<float> dtype0 = random_floats(c.type_emb.size(), 19);
  std::vector<float> ew = dword0, ep = dpos0, et = dtype0;
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < H; ++j) {
      ew[c.word[t] * H + j] += dout[t * H + j];
      ep[c.pos[t] * H + j] += dout[t * H + j];
      et[c.type[t] * H + j] += dout[t * H + j];
    }
  }
  for (int threads : {1, 2, 3}) {
    auto ops = make_cpu_ops(threads);
    std::vector<float> dw = dword0, dp = dpos0, dt = dtype0;
    ops->embedding_bwd({dw.data(), dp.data(), dt.data(), dout.data(), c.word.data(), c.pos.data(),
                        c.type.data(), T, H});
    EXPECT_EQ(dw, ew) << threads << " threads";
    EXPECT_EQ(dp, ep) << threads << " threads";
    EXPECT_EQ(dt, et) << threads << " threads";
  }
}

TEST(CpuGather, GatherRowsCopiesRows) {
  auto ops = make_cpu_ops(2);
  const int H = 7, rows_in = 10;
  const std::vector<float> in = random_floats(rows_in * H, 20);
  const std::vector<int32_t> rows = {9, 0, 3, 3, 5};
  std::vector<float> out(rows.size() * H);
  ops->gather_rows({out.data(), in.data(), rows.data(), static_cast<int64_t>(rows.size()), H});
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int j = 0; j < H; ++j) ASSERT_EQ(out[i * H + j], in[rows[i] * H + j]) << i << "," << j;
  }
}

TEST(CpuGather, ScatterAddRowsAccumulatesRepeatsDeterministically) {
  const int H = 300, rows_out = 6;  // H spans several column blocks
  const std::vector<int32_t> rows = {2, 5, 2, 0, 2, 5, 1};
  const std::vector<float> src = random_floats(rows.size() * H, 21);
  const std::vector<float> dst0 = random_floats(rows_out * H, 22);
  std::vector<float> expected = dst0;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int j = 0; j < H; ++j) expected[rows[i] * H + j] += src[i * H + j];
  }
  for (int threads : {1, 2, 4}) {
    auto ops = make_cpu_ops(threads);
    std::vector<float> dst = dst0;
    ops->scatter_add_rows({dst.data(), src.data(), rows.data(), static_cast<int64_t>(rows.size()), H});
    EXPECT_EQ(dst, expected) << threads << " threads";
  }
}

TEST(CpuGather, BadShapeNamesTheValues) {
  auto ops = make_cpu_ops(1);
  try {
    ops->gather_rows({nullptr, nullptr, nullptr, 3, 0});
    FAIL() << "H = 0 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("H=0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bert
