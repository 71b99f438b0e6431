// TFRecord files and the tf.train.Example records in them, read without TensorFlow. A record is
// framed as: uint64 length, masked CRC-32C of those 8 bytes, the data, masked CRC-32C of the
// data (all little-endian). An Example is Features{map<string, Feature>} where a Feature holds a
// BytesList, FloatList or Int64List (packed or not), decoded from the protobuf wire format.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace bert {

class TfRecordReader {
 public:
  explicit TfRecordReader(const std::string& path);  // Error(io) if it cannot be opened
  // The next record, or false at a clean end of file. A truncated record or a CRC mismatch
  // throws Error(data) naming the file, the record's index and its byte offset.
  bool next(std::string& record);
  uint64_t records_read() const { return index_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t index_ = 0, offset_ = 0;
};

struct ExampleFeature {
  enum class Kind { bytes, floats, int64s } kind = Kind::int64s;
  std::vector<int64_t> int64s;
  std::vector<float> floats;
  std::vector<std::string> bytes;
  size_t size() const;
  const char* kind_name() const;  // "int64", "float", "bytes"
};

using Example = std::map<std::string, ExampleFeature>;

// Decodes a serialized tf.train.Example; Error(data) prefixed by `context` if it is malformed.
Example parse_example(const std::string& record, const std::string& context);

}  // namespace bert
