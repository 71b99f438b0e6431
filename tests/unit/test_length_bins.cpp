// Length-binned training data (data.length_bins): every batch comes from one bin, all ranks draw
// the same bin at each batch (the draw depends on the seed and the batch index alone), bins are
// drawn in proportion to their size, a restored cursor continues exactly, and the bins are listed
// with their sizes.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/error.h"
#include "data/length_bin_source.h"
#include "data/sample_order.h"
#include "shard_fixtures.h"

namespace bert {
namespace {

using testing::TempDir;

constexpr int kSeq = 32, kPred = 5, kBins = 4, kBatch = 4;

// bin_<b>/shard_<f>.h5 with sequences whose lengths lie in bin b (8 tokens wide at seq 32);
// bin b holds (b + 1) * 40 sequences in 2 files (ids below the vocabulary size), so later bins are drawn more often.
void write_bins(const TempDir& dir) {
  for (int b = 0; b < kBins; ++b) {
    std::filesystem::create_directories(dir.file("bin_" + std::to_string(b)));
    for (int f = 0; f < 2; ++f) {
      const int lo = std::max(4, b * 8 + 1), hi = b * 8 + 8;
      const auto samples = testing::make_samples(b * 1000 + f * 500 + 1, (b + 1) * 20, lo, hi, 2);
      testing::write_shard(dir.file("bin_" + std::to_string(b) + "/shard_" + std::to_string(f) + ".h5"),
                           testing::dle_shard(samples, kSeq, kPred));
    }
  }
}

ShardSourceOptions options(const TempDir& dir, int rank, int world) {
  ShardSourceOptions o;
  o.path = dir.path();
  o.max_seq_length = kSeq;
  o.max_predictions_per_seq = kPred;
  o.seed = 11;
  o.rank = rank;
  o.world = world;
  return o;
}

// The bin of each of the next `n` batches; fails if a batch mixes bins.
std::vector<int> bins_of(DataSource& src, int n) {
  std::vector<int> out;
  HostBatch b;
  for (int k = 0; k < n; ++k) {
    src.next(b, kBatch);
    std::set<int> bins;
    for (int r = 0; r < kBatch; ++r) {
      int len = 0;
      for (int t = 0; t < kSeq; ++t) len += b.input_mask[static_cast<size_t>(r) * kSeq + t];
      bins.insert(length_bin(len, kBins, kSeq));
    }
    EXPECT_EQ(bins.size(), 1u) << "batch " << k << " mixes length bins";
    out.push_back(*bins.begin());
  }
  return out;
}

TEST(LengthBins, EveryRankDrawsTheSameBinForEachBatch) {
  TempDir dir;
  write_bins(dir);
  auto rank0 = make_length_bin_source(options(dir, 0, 2));
  auto rank1 = make_length_bin_source(options(dir, 1, 2));
  const std::vector<int> a = bins_of(*rank0, 200), b = bins_of(*rank1, 200);
  EXPECT_EQ(a, b);
  std::vector<int> count(kBins, 0);
  for (int bin : a) ++count[bin];
  for (int bin = 0; bin < kBins; ++bin) EXPECT_GT(count[bin], 0) << "bin " << bin << " never drawn";
  EXPECT_GT(count[3], 2 * count[0]);  // drawn in proportion to size: 160 vs 40 sequences
  // Another seed draws another sequence of bins.
  ShardSourceOptions other = options(dir, 0, 2);
  other.seed = 12;
  EXPECT_NE(bins_of(*make_length_bin_source(other), 200), a);
}

TEST(LengthBins, RestoredCursorContinuesExactly) {
  TempDir dir;
  write_bins(dir);
  auto a = make_length_bin_source(options(dir, 1, 2));
  bins_of(*a, 17);
  const nlohmann::json cursor = a->cursor();
  EXPECT_EQ(cursor["draws"], 17);
  auto b = make_length_bin_source(options(dir, 1, 2));
  b->restore(cursor);
  HostBatch x, y;
  for (int k = 0; k < 30; ++k) {
    a->next(x, kBatch);
    b->next(y, kBatch);
    ASSERT_EQ(x.input_ids, y.input_ids) << "batch " << k;
  }
}

// The bins the session and the cost model read: each with its sequences counted; a bin without
// files (bert-prep writes none for an empty bin) left out, and the listing stops at the first
// missing index.
TEST(LengthBins, ListedBinsCountTheirSequences) {
  TempDir dir;
  write_bins(dir);
  std::filesystem::create_directories(dir.file("bin_4"));
  std::filesystem::create_directories(dir.file("bin_6"));
  testing::write_shard(dir.file("bin_6/shard_0.h5"),
                       testing::dle_shard(testing::make_samples(7, 10, 4, 8, 2), kSeq, kPred));
  const std::vector<LengthBin> bins = list_length_bins(options(dir, 0, 1));
  ASSERT_EQ(bins.size(), static_cast<size_t>(kBins));
  for (int b = 0; b < kBins; ++b) {
    EXPECT_EQ(bins[b].name, "bin_" + std::to_string(b));
    EXPECT_EQ(bins[b].path, dir.file("bin_" + std::to_string(b)));
    EXPECT_EQ(bins[b].rows, static_cast<uint64_t>((b + 1) * 40));
  }
}

TEST(LengthBins, ADirectoryWithoutBinsIsRefused) {
  TempDir dir;
  try {
    make_length_bin_source(options(dir, 0, 1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert-prep bins"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bert
