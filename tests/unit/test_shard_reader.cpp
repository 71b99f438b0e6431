// Shard readers: decoding of the DLE, MLPerf variable-length and packed formats (any integer
// width), and every bad-input case giving an Error that names the file and the key at fault.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "data/shard_reader.h"
#include "../expect_error.h"
#include "shard_fixtures.h"

namespace bert {
namespace {

using testing::expect_error;

using testing::TempDir;
using testing::TestShard;

const ShardLimits kLimits{32, 5, 30522};

void expect_same_samples(const ShardSamples& got, const std::vector<testing::TestSample>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const int64_t t0 = got.token_begin[i], p0 = got.pred_begin[i];
    ASSERT_EQ(got.length(i), static_cast<int>(want[i].ids.size())) << "sample " << i;
    ASSERT_EQ(got.predictions(i), static_cast<int>(want[i].pos.size())) << "sample " << i;
    for (size_t t = 0; t < want[i].ids.size(); ++t) {
      EXPECT_EQ(got.input_ids[t0 + t], want[i].ids[t]);
      EXPECT_EQ(got.segment_ids[t0 + t], want[i].seg[t]);
    }
    for (size_t p = 0; p < want[i].pos.size(); ++p) {
      EXPECT_EQ(got.masked_lm_positions[p0 + p], want[i].pos[p]);
      EXPECT_EQ(got.masked_lm_ids[p0 + p], want[i].mids[p]);
    }
    EXPECT_EQ(got.next_sentence_labels[i], want[i].nsl);
  }
}

TEST(ShardReader, DecodesDleAndDetectsFormat) {
  TempDir dir;
  const auto samples = testing::make_samples(500, 37, 5, 30, 4);
  testing::write_shard(dir.file("a.h5"), testing::dle_shard(samples, 32, 5));
  EXPECT_EQ(inspect_shard(dir.file("a.h5"), kLimits).format, ShardFormat::dle);
  EXPECT_EQ(inspect_shard(dir.file("a.h5"), kLimits).rows, 37);
  expect_same_samples(read_shard(dir.file("a.h5"), kLimits), samples);
}

TEST(ShardReader, ConvertsAnyIntegerWidth) {
  TempDir dir;
  const auto samples = testing::make_samples(7, 9);
  TestShard s = testing::dle_shard(samples, 32, 5);
  s["input_ids"].file_type = H5T_STD_I64BE;
  s["input_mask"].file_type = H5T_STD_U8LE;
  s["segment_ids"].file_type = H5T_STD_I32LE;
  s["masked_lm_positions"].file_type = H5T_STD_U16LE;
  s["masked_lm_ids"].file_type = H5T_STD_I64LE;
  s["next_sentence_labels"].file_type = H5T_STD_I64LE;
  testing::write_shard(dir.file("wide.h5"), s);
  expect_same_samples(read_shard(dir.file("wide.h5"), kLimits), samples);
}

TEST(ShardReader, DleMasksEndAtFirstZeroPosition) {
  TempDir dir;
  auto samples = testing::make_samples(1, 2, 10, 10, 4);
  TestShard s = testing::dle_shard(samples, 32, 5);
  s["masked_lm_positions"].data[2] = 0;   // sample 0: [2, 3, 0, 5, 0] -> 2 predictions
  s["masked_lm_positions"].data[4] = 99;  // after the first 0: ignored, as in DLE
  testing::write_shard(dir.file("z.h5"), s);
  const ShardSamples got = read_shard(dir.file("z.h5"), kLimits);
  EXPECT_EQ(got.predictions(0), 2);
  EXPECT_EQ(got.predictions(1), 4);
}

TEST(ShardReader, DecodesMlperfAndUnpacksPackedRows) {
  TempDir dir;
  const auto samples = testing::make_samples(100, 25, 4, 12, 2);
  testing::write_shard(dir.file("v.h5"), testing::mlperf_shard(samples));
  testing::write_shard(dir.file("p.h5"), testing::packed_shard(samples, 3));
  EXPECT_EQ(inspect_shard(dir.file("v.h5"), kLimits).format, ShardFormat::mlperf);
  EXPECT_EQ(inspect_shard(dir.file("p.h5"), kLimits).format, ShardFormat::mlperf_packed);
  EXPECT_EQ(inspect_shard(dir.file("p.h5"), kLimits).rows, 9);
  expect_same_samples(read_shard(dir.file("v.h5"), kLimits), samples);
  expect_same_samples(read_shard(dir.file("p.h5"), kLimits), samples);
}

TEST(ShardReader, CopyToPadsLikeDle) {
  TempDir dir;
  testing::write_shard(dir.file("a.h5"), testing::dle_shard(testing::make_samples(42, 1, 6, 6, 2), 32, 5));
  const ShardSamples got = read_shard(dir.file("a.h5"), kLimits);
  HostBatch b;
  b.resize(2, 8, 4);
  std::fill(b.input_ids.begin(), b.input_ids.end(), 77);
  got.copy_to(0, b, 1);
  EXPECT_EQ(std::vector<int32_t>(b.input_mask.begin() + 8, b.input_mask.end()),
            (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(b.input_ids[8 + 1], 42);
  EXPECT_EQ(b.input_ids[8 + 6], 0);
  EXPECT_EQ(std::vector<int32_t>(b.masked_lm_positions.begin() + 4, b.masked_lm_positions.end()),
            (std::vector<int32_t>{2, 3, 0, 0}));
  EXPECT_EQ(b.input_ids[0], 77);  // row 0 untouched
  EXPECT_EQ(b.real_tokens(), 6);
}

struct BadCase {
  const char* name;
  void (*tamper)(TestShard&);
  std::vector<std::string> message;
};

TEST(ShardReader, BadDleInputsNameFileAndKey) {
  const std::vector<BadCase> cases = {
      {"missing key", [](TestShard& s) { s.erase("masked_lm_ids"); }, {"masked_lm_ids", "no dataset"}},
      {"float dtype", [](TestShard& s) { s["input_ids"].file_type = H5T_IEEE_F32LE; }, {"input_ids", "float"}},
      {"rows differ",
       [](TestShard& s) {
         s["segment_ids"].dims[0] -= 1;
         s["segment_ids"].data.resize(s["segment_ids"].data.size() - 32);
       },
       {"segment_ids", "inconsistent lengths"}},
      {"width differs",
       [](TestShard& s) {
         s["masked_lm_ids"].dims[1] = 4;
         s["masked_lm_ids"].data.resize(s["masked_lm_ids"].dims[0] * 4);
       },
       {"masked_lm_ids", "inconsistent lengths"}},
      {"token >= vocab",
       [](TestShard& s) { s["input_ids"].data[32 * 3 + 2] = 30522; },
       {"input_ids", "sample 3", "30522", "vocabulary"}},
      {"masked id >= vocab",
       [](TestShard& s) { s["masked_lm_ids"].data[5 * 1] = 40000; },
       {"masked_lm_ids", "sample 1", "40000"}},
      {"position beyond tokens",
       [](TestShard& s) { s["masked_lm_positions"].data[5 * 2 + 1] = 31; },
       {"masked_lm_positions", "sample 2", "31"}},
      {"negative position", [](TestShard& s) { s["masked_lm_positions"].data[0] = -4; }, {"masked_lm_positions", "-4"}},
      {"mask not a prefix", [](TestShard& s) { s["input_mask"].data[32 * 4 + 30] = 1; }, {"input_mask", "sample 4"}},
      {"segment id 2", [](TestShard& s) { s["segment_ids"].data[3] = 2; }, {"segment_ids", "sample 0"}},
      {"nsp label 3",
       [](TestShard& s) { s["next_sentence_labels"].data[6] = 3; },
       {"next_sentence_labels", "sample 6"}},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    TestShard s = testing::dle_shard(testing::make_samples(1, 8, 8, 20, 3), 32, 5);
    c.tamper(s);
    const std::string path = dir.file("bad.h5");
    testing::write_shard(path, s);
    std::vector<std::string> parts = c.message;
    parts.push_back(path);
    expect_error([&] { read_shard(path, kLimits); }, Code::data, parts);
  }
}

TEST(ShardReader, DleWiderThanLimitsFailsAtHeader) {
  TempDir dir;
  const std::string path = dir.file("wide.h5");
  testing::write_shard(path, testing::dle_shard(testing::make_samples(1, 4), 64, 5));
  expect_error([&] { inspect_shard(path, kLimits); }, Code::data, {path, "input_ids", "64", "max_seq_length 32"});
  testing::write_shard(path, testing::dle_shard(testing::make_samples(1, 4), 32, 9));
  expect_error([&] { inspect_shard(path, kLimits); }, Code::data,
               {path, "masked_lm_positions", "9", "max_predictions_per_seq 5"});
}

TEST(ShardReader, BadMlperfInputsNameFileAndKey) {
  TempDir dir;
  const std::string path = dir.file("v.h5");
  auto samples = testing::make_samples(1, 6, 8, 20, 3);

  samples[2].pos = {1, 2, 3, 4, 5, 6};
  samples[2].mids = {5, 5, 5, 5, 5, 5};
  testing::write_shard(path, testing::mlperf_shard(samples));
  expect_error([&] { read_shard(path, kLimits); }, Code::data,
               {path, "masked_lm_positions", "sample 2", "6 masked positions"});

  samples = testing::make_samples(1, 6, 8, 20, 3);
  samples[4] = testing::make_sample(9, 40, 2);
  testing::write_shard(path, testing::mlperf_shard(samples));
  expect_error([&] { read_shard(path, kLimits); }, Code::data, {path, "input_ids", "sample 4", "40 tokens"});

  samples = testing::make_samples(1, 6, 8, 20, 3);
  samples[1].seg.pop_back();
  testing::write_shard(path, testing::mlperf_shard(samples));
  expect_error([&] { read_shard(path, kLimits); }, Code::data,
               {path, "segment_ids", "sample 1", "inconsistent lengths"});

  TestShard s = testing::mlperf_shard(testing::make_samples(1, 6));
  s["input_ids"] = testing::fixed(H5T_STD_I32LE, {6, 32}, std::vector<int32_t>(6 * 32, 5));
  testing::write_shard(path, s);
  expect_error([&] { inspect_shard(path, kLimits); }, Code::data, {path, "input_ids", "variable-length"});

  s = testing::mlperf_shard(testing::make_samples(1, 6));
  s.erase("next_sentence_labels");
  testing::write_shard(path, s);
  expect_error([&] { inspect_shard(path, kLimits); }, Code::data, {path, "next_sentence_labels"});
}

TEST(ShardReader, BadPackedInputsNameFileAndKey) {
  TempDir dir;
  const std::string path = dir.file("p.h5");
  TestShard s = testing::packed_shard(testing::make_samples(1, 6, 8, 12, 2), 2);
  s["packed_input_len"].rows[1][0] += 1;
  testing::write_shard(path, s);
  expect_error([&] { read_shard(path, kLimits); }, Code::data,
               {path, "packed_input_len", "row 1", "inconsistent lengths"});

  s = testing::packed_shard(testing::make_samples(1, 6, 8, 12, 2), 2);
  s["masked_lm_positions"].rows[2][2] = 3;  // second sequence's entry pointing into the first
  testing::write_shard(path, s);
  expect_error([&] { read_shard(path, kLimits); }, Code::data, {path, "masked_lm_positions", "row 2, sequence 1"});

  s = testing::packed_shard(testing::make_samples(1, 6, 8, 12, 2), 2);
  s["next_sentence_labels"].rows[0].pop_back();
  testing::write_shard(path, s);
  expect_error([&] { read_shard(path, kLimits); }, Code::data, {path, "next_sentence_labels", "row 0"});
}

TEST(ShardReader, TruncatedAndForeignFilesAreIoErrors) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  testing::write_shard(path, testing::dle_shard(testing::make_samples(1, 200), 32, 5));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  expect_error([&] { read_shard(path, kLimits); }, Code::io, {path});

  const std::string text = dir.file("notes.txt");
  std::ofstream(text) << "not a shard\n";
  expect_error([&] { inspect_shard(text, kLimits); }, Code::io, {text, "not an HDF5 file"});
  expect_error([&] { inspect_shard(dir.file("absent.h5"), kLimits); }, Code::io, {"absent.h5", "does not exist"});
}

TEST(ShardReader, UnknownFormatIsConfigError) {
  TempDir dir;
  testing::write_shard(dir.file("a.h5"), testing::dle_shard(testing::make_samples(1, 3), 32, 5));
  expect_error([&] { inspect_shard(dir.file("a.h5"), kLimits, "tfrecord"); }, Code::config, {"tfrecord"});
  expect_error([&] { inspect_shard(dir.file("a.h5"), kLimits, "mlperf"); }, Code::data,
               {"input_ids", "variable-length"});
}

}  // namespace
}  // namespace bert
