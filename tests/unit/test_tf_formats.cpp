// CRC-32C against the published check values (RFC 3720 B.4, the "123456789" check), the
// protobuf wire reader, and random input to the TFRecord/Example and table parsers: any bytes
// are either read or refused with bert::Error, never a crash.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>
#include <string>

#include "ckpt/sstable.h"
#include "ckpt/tf_names.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/proto_wire.h"
#include "model/param_table.h"
#include "prep/tfrecord.h"

namespace {

TEST(Crc32c, PublishedCheckValues) {
  EXPECT_EQ(bert::crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(bert::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(bert::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(bert::crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
  // extending in pieces equals one pass
  EXPECT_EQ(bert::crc32c_extend(bert::crc32c("1234", 4), "56789", 5), 0xE3069283u);
}

TEST(Crc32c, HardwareAndTableFormsAgreeAtEveryLengthAndAlignment) {
  std::string bytes(300, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  for (size_t start = 0; start < 9; ++start) {
    for (size_t n = 0; start + n <= bytes.size(); n += 7) {
      ASSERT_EQ(bert::crc32c_extend(0x1234u, bytes.data() + start, n),
                bert::crc32c_portable(0x1234u, bytes.data() + start, n)) << start << " " << n;
    }
  }
  EXPECT_EQ(bert::crc32c_portable(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32c, CombineEqualsTheCrcOfTheConcatenation) {
  std::mt19937 rng(7);
  std::vector<unsigned char> bytes(1 << 16);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{40000}, bytes.size()}) {
    const uint32_t a = bert::crc32c(bytes.data(), split), b = bert::crc32c(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(bert::crc32c_combine(a, b, bytes.size() - split), bert::crc32c(bytes.data(), bytes.size())) << split;
  }
  // three parts, the middle one long (a length with many bits)
  std::vector<unsigned char> big(3'000'001);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<unsigned char>(i * 131 + 7);
  const uint32_t head = bert::crc32c(big.data(), 5), middle = bert::crc32c(big.data() + 5, big.size() - 9),
                 tail = bert::crc32c(big.data() + big.size() - 4, 4);
  EXPECT_EQ(bert::crc32c_combine(bert::crc32c_combine(head, middle, big.size() - 9), tail, 4),
            bert::crc32c(big.data(), big.size()));
}

TEST(ProtoReader, FieldsOfEveryWireType) {
  // field 1 varint 300, field 2 bytes "hi", field 3 fixed32 7, field 4 fixed64 9
  const std::string msg("\x08\xac\x02\x12\x02hi\x1d\x07\x00\x00\x00\x21\x09\x00\x00\x00\x00\x00\x00\x00", 21);
  bert::ProtoReader r(msg, "test", bert::Code::data);
  bert::ProtoField f;
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.number, 1u);
  EXPECT_EQ(f.value, 300u);
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.bytes, "hi");
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.value, 7u);
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.value, 9u);
  EXPECT_FALSE(r.next(f));
}

TEST(ProtoReader, TruncationNamesTheContext) {
  const std::string msg("\x12\x05hi", 4);  // says 5 bytes, has 2
  bert::ProtoReader r(msg, "record 3", bert::Code::data);
  bert::ProtoField f;
  try {
    r.next(f);
    FAIL() << "accepted a truncated field";
  } catch (const bert::Error& e) {
    EXPECT_NE(std::string(e.what()).find("record 3: malformed protobuf"), std::string::npos) << e.what();
  }
}

TEST(TfFormats, RandomBytesAreReadOrRefused) {
  std::mt19937 rng(7);
  const std::string path = (std::filesystem::temp_directory_path() / ("tf_formats_fuzz_" + std::to_string(::getpid()))).string();
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes(rng() % 200, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    EXPECT_NO_FATAL_FAILURE({
      try {
        bert::parse_example(bytes, "fuzz");
      } catch (const bert::Error&) {
      }
    });
    // a table whose footer carries the right magic, so the parser goes past it
    if (trial % 2 && bytes.size() >= 48) {
      const uint64_t magic = 0xdb4775248b80fb57ull;
      std::memcpy(bytes.data() + bytes.size() - 8, &magic, 8);
    }
    std::ofstream(path, std::ios::binary) << bytes;
    try {
      bert::read_sstable(path);
    } catch (const bert::Error&) {
    }
    try {
      bert::TfRecordReader reader(path);
      std::string record;
      while (reader.next(record)) {
      }
    } catch (const bert::Error&) {
    }
  }
  std::remove(path.c_str());
}

}  // namespace

// Every tensor of BERT-large's pretraining model has a TF name that maps back onto it: MLPerf's
// weights_initialization list is made of these (398 names, checked against the official
// checker's ruleset 1.1.0 in tests/train/test_mlperf_log.py).
TEST(TfNames, BertLargeNamesRoundTrip) {
  const bert::ParamTable table(bert::parse_bert_config(nlohmann::json("bert-large"), "model"));
  ASSERT_EQ(table.entries.size(), 398u);
  for (const bert::ParamEntry& e : table.entries) {
    const std::string tf = bert::tf_bert_name(e.name);
    bert::TfNameMapping back;
    ASSERT_TRUE(bert::map_tf_bert_name(tf, back)) << tf;
    EXPECT_EQ(back.target, e.name) << tf;
    EXPECT_EQ(back.group, "model");
  }
  EXPECT_EQ(bert::tf_bert_name("bert.encoder.layer.23.attention.self.query.weight"),
            "bert/encoder/layer_23/attention/self/query/kernel");
  EXPECT_EQ(bert::tf_bert_name("bert.embeddings.LayerNorm.weight"), "bert/embeddings/LayerNorm/gamma");
  EXPECT_EQ(bert::tf_bert_name("bert.embeddings.word_embeddings.weight"), "bert/embeddings/word_embeddings");
  EXPECT_EQ(bert::tf_bert_name("cls.predictions.bias"), "cls/predictions/output_bias");
  EXPECT_EQ(bert::tf_bert_name("cls.seq_relationship.weight"), "cls/seq_relationship/output_weights");
  EXPECT_EQ(bert::tf_bert_name("cls.predictions.transform.LayerNorm.bias"), "cls/predictions/transform/LayerNorm/beta");
}
