// The shard data source: DLE shard assignment and shuffles (bit-exact with Python's random for
// the file order), per-epoch coverage for several (world, files), exact resume from a cursor,
// prefetch error propagation, skip_bad_shards, length bucketing, and cursors moved to another
// number of ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "data/cursor_rescale.h"
#include "data/sample_order.h"
#include "data/shard_plan.h"
#include "data/shard_source.h"
#include "../expect_error.h"
#include "shard_fixtures.h"

namespace bert {
namespace {

using testing::TempDir;

constexpr int kSeq = 32, kPred = 5;

// Writes `files` DLE shards named shard_00.h5, ... with `per_file` samples each; sample ids are
// file * 1000 + index.
void write_dataset(const TempDir& dir, int files, int per_file, int min_len = 6, int max_len = 30) {
  for (int f = 0; f < files; ++f) {
    const auto samples = testing::make_samples(f * 1000 + 1, per_file, min_len, max_len, 3);
    testing::write_shard(dir.file("shard_" + std::to_string(10 + f) + ".h5"), testing::dle_shard(samples, kSeq, kPred));
  }
}

ShardSourceOptions options(const TempDir& dir) {
  ShardSourceOptions o;
  o.path = dir.path();
  o.max_seq_length = kSeq;
  o.max_predictions_per_seq = kPred;
  o.vocab_size = 30522;
  o.seed = 7;
  return o;
}

// Sample ids (token 1 of each row) of the next `batches` batches.
std::vector<int> take(DataSource& src, int batches, int batch_size) {
  std::vector<int> ids;
  HostBatch b;
  for (int k = 0; k < batches; ++k) {
    src.next(b, batch_size);
    EXPECT_EQ(b.batch_size, batch_size);
    EXPECT_EQ(b.seq_length, kSeq);
    for (int r = 0; r < batch_size; ++r) ids.push_back(b.input_ids[static_cast<size_t>(r) * kSeq + 1]);
  }
  return ids;
}

std::vector<int> all_ids(int files, int per_file) {
  std::vector<int> v;
  for (int f = 0; f < files; ++f)
    for (int i = 0; i < per_file; ++i) v.push_back(f * 1000 + 1 + i);
  return v;
}

TEST(ShardPlan, FileOrderIsPythonRandomShuffle) {
  // random.Random(42).shuffle(list(range(20))) in CPython.
  const std::vector<uint32_t> python = {19, 5, 14, 4, 9, 13, 15, 18, 6, 12, 17, 10, 1, 11, 2, 16, 7, 8, 0, 3};
  EXPECT_EQ(epoch_file_order(20, 42, 0, true), python);
  EXPECT_EQ(epoch_file_order(20, 40, 2, true), python);  // seed + epoch, as in DLE
  EXPECT_NE(epoch_file_order(20, 42, 1, true), python);
  std::vector<uint32_t> identity(20);
  std::iota(identity.begin(), identity.end(), 0u);
  EXPECT_EQ(epoch_file_order(20, 42, 0, false), identity);
}

TEST(ShardPlan, RanksFollowDleIndexRule) {
  for (int world : {1, 2, 3, 4, 8}) {
    for (uint32_t n : {1u, 2u, 5u, 8u, 13u}) {
      SCOPED_TRACE("world " + std::to_string(world) + " files " + std::to_string(n));
      const auto order = epoch_file_order(n, 3, 1, true);
      std::multiset<uint32_t> files_read;
      std::map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>> shares;  // file -> (stride, offset)
      for (int r = 0; r < world; ++r) {
        const auto slots = epoch_slots(n, 3, 1, r, world, true);
        ASSERT_EQ(slots.size(), slots_per_epoch(n, world));
        for (size_t f_id = 0; f_id < slots.size(); ++f_id) {
          if (static_cast<uint32_t>(world) <= n) {
            EXPECT_EQ(slots[f_id].file, order[(f_id * world + r) % n]);
            EXPECT_EQ(slots[f_id].stride, 1u);
          }
          files_read.insert(slots[f_id].file);
          shares[slots[f_id].file].push_back({slots[f_id].stride, slots[f_id].offset});
        }
      }
      for (uint32_t f = 0; f < n; ++f) EXPECT_GE(files_read.count(f), 1u) << "file " << f << " unread";
      if (static_cast<uint32_t>(world) > n) {
        // Ranks sharing a file split it: strides equal the number of sharers, offsets 0..k-1.
        for (auto& [file, v] : shares) {
          std::set<uint32_t> offsets;
          for (auto [stride, offset] : v) {
            EXPECT_EQ(stride, v.size());
            offsets.insert(offset);
          }
          EXPECT_EQ(offsets.size(), v.size());
          EXPECT_EQ(*offsets.rbegin(), v.size() - 1);
        }
      } else {
        EXPECT_EQ(files_read.size(), slots_per_epoch(n, world) * world);
      }
    }
  }
  const auto s = epoch_slots(3, 0, 0, 4, 7, true);  // 7 ranks, 3 files: ranks 1, 4 share a file
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].file, epoch_file_order(3, 0, 0, true)[1]);
  EXPECT_EQ(s[0].stride, 2u);
  EXPECT_EQ(s[0].offset, 1u);
}

TEST(SampleOrder, PhiloxShuffleIsAFixedPermutation) {
  const auto a = shuffled_indices(1000, 5, 2, 9);
  EXPECT_EQ(a, shuffled_indices(1000, 5, 2, 9));
  EXPECT_NE(a, shuffled_indices(1000, 5, 3, 9));
  EXPECT_NE(a, shuffled_indices(1000, 5, 2, 10));
  std::vector<uint32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  // Golden values: the order must not depend on the platform or standard library.
  EXPECT_EQ(std::vector<uint32_t>(a.begin(), a.begin() + 8),
            (std::vector<uint32_t>{193, 67, 759, 144, 472, 915, 44, 202}));
}

TEST(ShardSource, EachEpochDeliversEverySampleOnce) {
  TempDir dir;
  write_dataset(dir, 3, 23);
  auto src = make_shard_source(options(dir));
  const int B = 5, per_epoch = 3 * 23;
  std::vector<int> got = take(*src, 2 * per_epoch / B + 1, B);  // batches span shards and epochs
  std::vector<int> epoch0(got.begin(), got.begin() + per_epoch),
      epoch1(got.begin() + per_epoch, got.begin() + 2 * per_epoch);
  EXPECT_NE(epoch0, epoch1);
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  EXPECT_EQ(epoch0, all_ids(3, 23));
  EXPECT_EQ(epoch1, all_ids(3, 23));
  // Same seed, same stream; another seed, another stream.
  auto again = make_shard_source(options(dir));
  EXPECT_EQ(take(*again, 10, B), std::vector<int>(got.begin(), got.begin() + 50));
  auto o = options(dir);
  o.seed = 8;
  auto other = make_shard_source(o);
  EXPECT_NE(take(*other, 10, B), std::vector<int>(got.begin(), got.begin() + 50));
}

TEST(ShardSource, RanksPartitionAnEpoch) {
  struct Case {
    int files, world, per_file;
  };
  for (const Case c : {Case{4, 2, 10}, Case{6, 3, 7}, Case{2, 4, 12}, Case{3, 7, 14}}) {
    SCOPED_TRACE("files " + std::to_string(c.files) + " world " + std::to_string(c.world));
    TempDir dir;
    write_dataset(dir, c.files, c.per_file);
    std::vector<int> seen;
    for (int r = 0; r < c.world; ++r) {
      auto o = options(dir);
      o.rank = r;
      o.world = c.world;
      // One epoch of this rank: its slots' sample counts.
      size_t mine = 0;
      for (const ShardSlot& s : epoch_slots(c.files, o.seed, 0, r, c.world, true)) {
        mine += (c.per_file - s.offset + s.stride - 1) / s.stride;
      }
      auto src = make_shard_source(o);
      auto ids = take(*src, static_cast<int>(mine), 1);
      seen.insert(seen.end(), ids.begin(), ids.end());
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, all_ids(c.files, c.per_file));
  }
}

TEST(ShardSource, ResumeFromCursorContinuesExactly) {
  TempDir dir;
  write_dataset(dir, 3, 17);
  for (int bins : {0, 3}) {
    for (int before : {0, 1, 4, 9, 15}) {  // stops inside a shard, at shard ends, in epoch 1
      SCOPED_TRACE("bins " + std::to_string(bins) + " batches before " + std::to_string(before));
      auto o = options(dir);
      o.bucket_bins = bins;
      auto a = make_shard_source(o);
      take(*a, before, 4);
      const std::string saved = a->cursor().dump();
      const std::vector<int> rest = take(*a, 12, 4);

      auto b = make_shard_source(o);
      take(*b, 2, 4);  // a different position, overwritten by restore
      b->restore(nlohmann::json::parse(saved));
      EXPECT_EQ(b->cursor().dump(), saved);
      EXPECT_EQ(take(*b, 12, 4), rest);
    }
  }
}

TEST(ShardSource, BatchSizeChangeKeepsTheSampleStream) {
  TempDir dir;
  write_dataset(dir, 2, 13);
  auto a = make_shard_source(options(dir));
  std::vector<int> mixed = take(*a, 3, 3);
  const auto more = take(*a, 4, 5);
  mixed.insert(mixed.end(), more.begin(), more.end());
  auto b = make_shard_source(options(dir));
  EXPECT_EQ(take(*b, 29, 1), mixed);
}

TEST(ShardSource, RestoreRejectsAnotherLayout) {
  TempDir dir;
  write_dataset(dir, 2, 5);
  auto a = make_shard_source(options(dir));
  nlohmann::json c = a->cursor();
  c["world"] = 8;
  try {
    a->restore(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::data);
    EXPECT_NE(std::string(e.what()).find("world = 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(a->restore(nlohmann::json{{"kind", "synthetic"}}), Error);
  c = a->cursor();
  c["slot"] = 2;
  EXPECT_THROW(a->restore(c), Error);
}

// W ranks read part of epoch 0 of 12 files of different sizes; W' ranks continue from their
// cursors moved by cursor_for_world to the end of the epoch. Together they read every sample of
// the epoch, and the files read twice are exactly those at or after the first position some saved
// rank had not finished that saved ranks had started (position f·W + r of the epoch's file order
// is rank r's slot f).
TEST(ShardSource, CursorsMoveToAnotherWorldSize) {
  constexpr int kFiles = 12;
  TempDir dir;
  std::map<int, int> file_of;  // sample id -> file
  for (int f = 0; f < kFiles; ++f) {
    const auto samples = testing::make_samples(f * 1000 + 1, 4 + 2 * f, 6, 30, 3);
    for (const auto& s : samples) file_of[s.ids[1]] = f;
    testing::write_shard(dir.file("shard_" + std::to_string(10 + f) + ".h5"), testing::dle_shard(samples, kSeq, kPred));
  }
  struct Case {
    int from, to, batches;
  };
  for (const Case c : {Case{4, 2, 5}, Case{2, 3, 9}, Case{3, 4, 1}, Case{4, 1, 5}, Case{1, 4, 20}, Case{2, 2, 7}}) {
    SCOPED_TRACE("world " + std::to_string(c.from) + " -> " + std::to_string(c.to) + " after " +
                 std::to_string(c.batches) + " batches");
    std::map<int, int> seen;
    nlohmann::json saved = nlohmann::json::array();
    for (int r = 0; r < c.from; ++r) {
      auto o = options(dir);
      o.rank = r;
      o.world = c.from;
      auto src = make_shard_source(o);
      for (int id : take(*src, c.batches, 3)) ++seen[id];
      saved.push_back(src->cursor());
      ASSERT_EQ(saved.back().at("epoch"), 0);
    }
    for (int r = 0; r < c.to; ++r) {
      auto o = options(dir);
      o.rank = r;
      o.world = c.to;
      auto src = make_shard_source(o);
      const nlohmann::json cursor = cursor_for_world(saved, r, c.to);
      src->restore(cursor);
      ASSERT_EQ(cursor.at("epoch"), 0);
      // The rest of this rank's epoch 0: the samples of its slots from the restored one on.
      int rest = 0;
      const auto slots = epoch_slots(kFiles, o.seed, 0, r, c.to, true);
      for (size_t f = cursor.at("slot").get<size_t>(); f < slots.size(); ++f) rest += 4 + 2 * static_cast<int>(slots[f].file);
      for (int id : take(*src, rest, 1)) ++seen[id];
    }
    // Positions the saved ranks had started, and the first one some rank had not finished.
    const auto order = epoch_file_order(kFiles, options(dir).seed, 0, true);
    std::set<int> expected_reread;
    size_t first_unfinished = kFiles;
    for (int r = 0; r < c.from; ++r) {
      const size_t slot = saved[r].at("slot"), sample = saved[r].at("sample");
      first_unfinished = std::min(first_unfinished, slot * c.from + r);
      for (size_t f = 0; f <= slot && f * c.from + r < kFiles; ++f) {
        if (f < slot || sample > 0) expected_reread.insert(static_cast<int>(f * c.from + r));
      }
    }
    std::set<int> expected_files;
    for (int q : expected_reread)
      if (q >= static_cast<int>(first_unfinished)) expected_files.insert(static_cast<int>(order[q]));
    std::set<int> reread_files;
    for (int f = 0; f < kFiles; ++f) {
      for (int i = 0; i < 4 + 2 * f; ++i) {
        const int id = f * 1000 + 1 + i;
        EXPECT_GE(seen[id], 1) << "sample " << id << " of file " << f << " skipped";
        if (seen[id] > 1) reread_files.insert(f);
      }
    }
    EXPECT_EQ(reread_files, expected_files);
  }
}

TEST(ShardSource, CursorsMoveOnlyWithEnoughFiles) {
  TempDir dir;
  write_dataset(dir, 3, 5);
  nlohmann::json saved = nlohmann::json::array();
  for (int r = 0; r < 2; ++r) {
    auto o = options(dir);
    o.rank = r;
    o.world = 2;
    saved.push_back(make_shard_source(o)->cursor());
  }
  EXPECT_EQ(cursor_for_world(saved, 2, 3).at("slot"), 0);
  try {
    cursor_for_world(saved, 0, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::data);
    EXPECT_NE(std::string(e.what()).find("cannot move to 4 ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at least as many shard files as ranks"), std::string::npos) << e.what();
  }
  saved[1]["seed"] = 99;
  EXPECT_THROW(cursor_for_world(saved, 0, 1), Error);
  EXPECT_THROW(cursor_for_world(nlohmann::json::array(), 0, 1), Error);
}

TEST(ShardSource, PrefetchErrorReachesConsumerAfterGoodBatches) {
  TempDir dir;
  write_dataset(dir, 1, 12);  // shard_10.h5: good
  auto s = testing::dle_shard(testing::make_samples(2001, 12, 6, 20, 3), kSeq, kPred);
  s["input_ids"].data[kSeq * 5 + 3] = 99999;
  testing::write_shard(dir.file("shard_11.h5"), s);  // header fine, values bad
  auto o = options(dir);
  o.shuffle = false;  // shard_10 first
  o.batch_size = 4;
  auto src = make_shard_source(o);
  EXPECT_EQ(take(*src, 3, 4), all_ids(1, 12));
  HostBatch b;
  for (int attempt = 0; attempt < 2; ++attempt) {  // the error stays
    try {
      src->next(b, 4);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::data);
      const std::string m = e.what();
      EXPECT_NE(m.find("shard_11.h5"), std::string::npos) << m;
      EXPECT_NE(m.find("input_ids"), std::string::npos) << m;
      EXPECT_NE(m.find("99999"), std::string::npos) << m;
    }
  }
}

std::mutex log_mutex;
std::vector<std::string> warnings;
void capture(int level, const char* message, void*) {
  std::lock_guard<std::mutex> lock(log_mutex);
  if (level == log_warning) warnings.emplace_back(message);
}

TEST(ShardSource, SkipBadShardsWarnsAndSkips) {
  TempDir dir;
  write_dataset(dir, 2, 9);  // shard_10, shard_11 good
  auto missing = testing::dle_shard(testing::make_samples(5001, 9), kSeq, kPred);
  missing.erase("segment_ids");
  testing::write_shard(dir.file("shard_12.h5"), missing);  // bad header
  auto bad_values = testing::dle_shard(testing::make_samples(6001, 9), kSeq, kPred);
  bad_values["masked_lm_positions"].data[kPred * 2] = 31;
  testing::write_shard(dir.file("shard_13.h5"), bad_values);  // bad values

  try {
    make_shard_source(options(dir));
    FAIL() << "no error without skip_bad_shards";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard_12.h5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("segment_ids"), std::string::npos) << e.what();
  }

  warnings.clear();
  set_log_sink([](int level, const char* message) { capture(level, message, nullptr); });
  auto o = options(dir);
  o.skip_bad_shards = true;
  auto src = make_shard_source(o);
  std::vector<int> ids = take(*src, 18 * 3, 1);  // three epochs of the good samples
  set_log_sink(nullptr);
  for (int e = 0; e < 3; ++e) {
    std::vector<int> epoch(ids.begin() + e * 18, ids.begin() + (e + 1) * 18);
    std::sort(epoch.begin(), epoch.end());
    EXPECT_EQ(epoch, all_ids(2, 9)) << "epoch " << e;
  }
  std::lock_guard<std::mutex> lock(log_mutex);
  bool header = false, values = false;
  for (const std::string& w : warnings) {
    header |= w.find("shard_12.h5") != std::string::npos && w.find("segment_ids") != std::string::npos;
    values |= w.find("shard_13.h5") != std::string::npos && w.find("masked_lm_positions") != std::string::npos;
  }
  EXPECT_TRUE(header);
  EXPECT_TRUE(values);
}

TEST(ShardSource, MissingOrEmptyDatasetFails) {
  TempDir dir;
  auto o = options(dir);
  try {
    make_shard_source(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::data);
    EXPECT_NE(std::string(e.what()).find("no shard files"), std::string::npos) << e.what();
  }
  o.path = dir.file("nowhere");
  try {
    make_shard_source(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::io);
    EXPECT_NE(std::string(e.what()).find("nowhere"), std::string::npos) << e.what();
  }
  o.path = dir.path();
  o.rank = 3;
  o.world = 2;
  EXPECT_THROW(make_shard_source(o), Error);
}

// bert-prep's output folder (bert_prep_shards.json beside train/ and eval/) is refused with the
// folders that hold the shards named, not with "cannot open bert_prep_shards.json as HDF5".
TEST(ShardSource, BertPrepOutputFolderNamesItsShardFolders) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("train"));
  std::filesystem::create_directory(dir.file("eval"));
  std::ofstream(dir.file("bert_prep_shards.json")) << "{}";
  testing::expect_error([&] { make_shard_source(options(dir)); }, Code::data,
                        {"output folder of bert-prep shards", "'" + dir.file("train") + "'",
                         "'" + dir.file("eval") + "'"});
}

TEST(ShardSource, GlobSelectsFiles) {
  TempDir dir;
  write_dataset(dir, 3, 4);
  auto o = options(dir);
  o.path = dir.file("shard_1[02].h5");
  auto src = make_shard_source(o);
  std::vector<int> ids = take(*src, 8, 1);
  std::sort(ids.begin(), ids.end());
  std::vector<int> want = {1, 2, 3, 4, 2001, 2002, 2003, 2004};
  EXPECT_EQ(ids, want);
}

TEST(ShardSource, LengthBucketsGroupBatches) {
  TempDir dir;
  write_dataset(dir, 2, 60, 2, 32);
  auto o = options(dir);
  o.bucket_bins = 4;  // lengths <= 8, <= 16, <= 24, <= 32
  const int B = 4;
  auto src = make_shard_source(o);
  HostBatch b;
  int mixed = 0;
  std::set<int> seen;
  const int batches = 2 * (60 / B);  // one epoch: each shard yields whole batches
  for (int k = 0; k < batches; ++k) {
    src->next(b, B);
    std::set<int> bins;
    for (int r = 0; r < B; ++r) {
      int len = 0;
      for (int t = 0; t < kSeq; ++t) len += b.input_mask[static_cast<size_t>(r) * kSeq + t];
      bins.insert(length_bin(len, 4, kSeq));
      EXPECT_TRUE(seen.insert(b.input_ids[static_cast<size_t>(r) * kSeq + 1]).second) << "sample repeated";
    }
    mixed += bins.size() > 1;
  }
  EXPECT_LE(mixed, 2 * 3);  // at most bins - 1 mixed batches per shard
  EXPECT_GE(seen.size(), 2u * 60 - 2 * (B - 1));
}

}  // namespace
}  // namespace bert
