// The checkpoint seal (src/ckpt/checkpoint_seal.h): a round trip, a summary read without HDF5, a
// summary too long for 512 bytes (a larger userblock that HDF5 still reads), every byte of the
// seal covered (each one flipped is refused), flips behind it caught by the whole-file CRC and
// truncations by the length.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_seal.h"
#include "core/error.h"

namespace {

namespace fs = std::filesystem;

bert::CheckpointContents contents(const std::string& run_id) {
  bert::CheckpointContents c;
  c.config_json = R"({"model": "tiny"})";
  c.state = {{"global_step", 7}, {"run_id", run_id}, {"written_ns", 123}, {"phase", 1}};
  c.model["a"] = {{2, 3}, {1, 2, 3, 4, 5, 6}};
  c.model["b"] = {{4}, {0.5f, -1, 2, 8}};
  return c;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class Seal : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("bert_seal_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    path = (dir / "ckpt.h5").string();
    damaged = (dir / "damaged.h5").string();
  }
  void TearDown() override { fs::remove_all(dir); }
  // The message of the Error(checkpoint) that `read` throws on the damaged file ("" if none).
  template <typename Read>
  std::string refusal(Read read) {
    try {
      read(damaged);
    } catch (const bert::Error& e) {
      EXPECT_EQ(e.code(), bert::Code::checkpoint) << e.what();
      return e.what();
    }
    return "";
  }
  fs::path dir;
  std::string path, damaged;
};

TEST_F(Seal, RoundTripAndSummaryWithoutHdf5) {
  bert::write_checkpoint(path, contents("run-1"));
  const std::string bytes = read_bytes(path);
  ASSERT_EQ(bytes.rfind("bertengine checkpoint seal 1\n{", 0), 0u) << bytes.substr(0, 64);
  const bert::CheckpointContents c = bert::read_checkpoint(path);
  EXPECT_TRUE(c.sealed);
  EXPECT_EQ(c.model.at("b").data, (std::vector<float>{0.5f, -1, 2, 8}));
  EXPECT_EQ(bert::read_checkpoint_summary(path),
            (nlohmann::json{{"global_step", 7}, {"run_id", "run-1"}, {"written_ns", 123}}));
  // The summary comes from the seal alone: it reads even with the HDF5 data destroyed.
  std::string broken = bytes;
  for (size_t i = 512; i < broken.size(); ++i) broken[i] = 'x';
  write_bytes(damaged, broken);
  EXPECT_EQ(bert::read_checkpoint_summary(damaged)["run_id"], "run-1");
  EXPECT_NE(refusal(bert::read_checkpoint).find("checkpoint '" + damaged + "' is corrupt: checksum mismatch"),
            std::string::npos);
}

TEST_F(Seal, LongSummaryGetsALargerUserblockThatHdf5Reads) {
  const std::string run_id(3000, 'r');
  bert::write_checkpoint(path, contents(run_id));
  const std::optional<bert::CheckpointSeal> seal = bert::read_seal(path, true);
  ASSERT_TRUE(seal.has_value());
  EXPECT_EQ(seal->userblock, 4096u);
  EXPECT_EQ(bert::read_checkpoint(path).state["run_id"], run_id);
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  hid_t fcpl = H5Fget_create_plist(file);
  hsize_t userblock = 0;
  H5Pget_userblock(fcpl, &userblock);
  EXPECT_EQ(userblock, 4096u);
  H5Pclose(fcpl);
  H5Fclose(file);
}

TEST_F(Seal, EveryByteOfTheSealIsCovered) {
  bert::write_checkpoint(path, contents("run-2"));
  const std::string bytes = read_bytes(path);
  for (size_t i = 0; i < 512; ++i) {
    std::string flipped = bytes;
    flipped[i] ^= 0x20;
    write_bytes(damaged, flipped);
    const std::string m = refusal(bert::read_checkpoint_summary);
    ASSERT_NE(m.find("checkpoint '" + damaged + "' is corrupt: "), std::string::npos) << "byte " << i << ": " << m;
  }
}

TEST_F(Seal, FlipsBehindTheSealFailTheCrcAndTruncationsTheLength) {
  bert::write_checkpoint(path, contents("run-3"));
  const std::string bytes = read_bytes(path);
  for (size_t i = 512; i < bytes.size(); i += 97) {
    std::string flipped = bytes;
    flipped[i] ^= 0x01;
    write_bytes(damaged, flipped);
    const std::string m = refusal(bert::read_checkpoint);
    ASSERT_NE(m.find("is corrupt: checksum mismatch (CRC-32C"), std::string::npos) << "byte " << i << ": " << m;
  }
  for (size_t keep = 0; keep < bytes.size(); keep += 331) {
    write_bytes(damaged, bytes.substr(0, keep));
    for (const std::string& m : {refusal(bert::read_checkpoint), refusal(bert::read_checkpoint_summary)}) {
      ASSERT_NE(m.find("checkpoint '" + damaged + "' is corrupt: "), std::string::npos) << keep << ": " << m;
      ASSERT_NE(m.find("truncated"), std::string::npos) << keep << ": " << m;
    }
  }
}

}  // namespace
