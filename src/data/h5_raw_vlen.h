// Reads variable-length integer datasets without HDF5's vlen conversion, which trusts the file:
// a flipped bit in a sequence's heap address or size makes it read wild memory (a segfault
// inside H5HG_read) or loop. Here the dataset's raw descriptors (length, global-heap collection
// address, object index) are read from its storage (contiguous, or chunked with no filter,
// deflate and/or shuffle), and each sequence from the file's global heap collection ("GCOL"),
// parsed with every address, index and size checked against the file. A corrupt shard becomes
// Error(data) naming the file, the dataset and the row. Layouts and file parameters it does not
// know (compact storage, other filters, 4-byte addresses, big-endian elements) report
// supported() == false, and the caller uses HDF5's conversion.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bert {

class RawVlenReader {
 public:
  // dataset: an open rank-1 VLEN-of-integer dataset of `file` at `path`; where: for messages.
  RawVlenReader(hid_t file, hid_t dataset, const std::string& path, const std::string& where);
  ~RawVlenReader();
  RawVlenReader(const RawVlenReader&) = delete;
  RawVlenReader& operator=(const RawVlenReader&) = delete;

  bool supported() const { return supported_; }
  // Rows [begin, begin + count) as int32: values concatenated, row r has lengths[r] values.
  void read(uint64_t begin, uint64_t count, std::vector<int32_t>& values, std::vector<int64_t>& lengths);

 private:
  struct HeapObject {
    uint64_t offset = 0, size = 0;  // within the collection's bytes
  };
  struct Collection {
    std::vector<uint8_t> bytes;
    std::map<uint32_t, HeapObject> objects;
  };

  void read_descriptors(uint64_t begin, uint64_t count, std::vector<uint8_t>& out);
  const std::vector<uint8_t>& chunk(uint64_t index);
  const Collection& collection(uint64_t address, uint64_t row);
  void pread_exact(uint64_t offset, uint64_t size, void* out, const char* what) const;
  [[noreturn]] void corrupt(uint64_t row, const std::string& what) const;

  hid_t dataset_;
  std::string path_, where_;
  int fd_ = -1;
  bool supported_ = false;
  uint64_t file_size_ = 0, base_ = 0, rows_ = 0;
  int element_size_ = 0;
  bool element_signed_ = true;
  // Storage: contiguous at contiguous_address_, or chunks of chunk_rows_ rows through filters_.
  bool chunked_ = false;
  uint64_t contiguous_address_ = 0, chunk_rows_ = 0;
  std::vector<H5Z_filter_t> filters_;  // in pipeline (write) order
  uint64_t cached_chunk_ = UINT64_MAX;
  std::vector<uint8_t> chunk_bytes_;
  std::map<uint64_t, Collection> collections_;  // by heap address; cleared when it grows large
  uint64_t cached_collection_bytes_ = 0;
};

}  // namespace bert
