// RawVlenReader: variable-length integer datasets read from their raw storage and the file's
// global heap with every address, index and size checked (see the header). Formats, from the
// HDF5 File Format Specification (version 2/3 superblocks, 8-byte offsets and lengths):
//   a vlen element on disk: uint32 sequence length, uint64 collection address, uint32 object index;
//   a global heap collection: "GCOL", version 1, 3 reserved bytes, uint64 collection size (header
//   included), then objects: uint16 index, uint16 reference count, 4 reserved bytes, uint64
//   size, the data padded to a multiple of 8; index 0 is the free space that ends the list.
#include "data/h5_raw_vlen.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/error.h"
#include "core/hdf5_check.h"

namespace bert {
namespace {

constexpr uint64_t kDescriptorBytes = 16;          // length + collection address + object index
constexpr uint64_t kHeapHeaderBytes = 16;          // "GCOL", version, reserved, collection size
constexpr uint64_t kMaxCollectionBytes = 1 << 30;  // a sane bound on one collection
constexpr uint64_t kCollectionCacheBytes = 64 << 20;

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

int64_t element_at(const uint8_t* p, int size, bool is_signed) {
  const uint64_t raw = le(p, size);
  if (!is_signed || size == 8) return static_cast<int64_t>(raw);
  const uint64_t sign_bit = uint64_t{1} << (8 * size - 1);
  return static_cast<int64_t>((raw ^ sign_bit) - sign_bit);
}

}  // namespace

RawVlenReader::RawVlenReader(hid_t file, hid_t dataset, const std::string& path, const std::string& where)
    : dataset_(dataset), path_(path), where_(where) {
  Hdf5Silence silence;
  Hdf5Id fcpl(H5Fget_create_plist(file), H5Pclose);
  size_t sizeof_addr = 0, sizeof_size = 0;
  hsize_t userblock = 0;
  if (fcpl.get() < 0 || H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size) < 0 || sizeof_addr != 8 ||
      sizeof_size != 8 || H5Pget_userblock(fcpl.get(), &userblock) < 0) {
    return;
  }
  base_ = userblock;

  Hdf5Id type(H5Dget_type(dataset), H5Tclose);
  if (type.get() < 0 || H5Tget_class(type.get()) != H5T_VLEN) return;
  Hdf5Id element(H5Tget_super(type.get()), H5Tclose);
  if (element.get() < 0 || H5Tget_class(element.get()) != H5T_INTEGER) return;
  element_size_ = static_cast<int>(H5Tget_size(element.get()));
  element_signed_ = H5Tget_sign(element.get()) == H5T_SGN_2;
  if (element_size_ != 1 && element_size_ != 2 && element_size_ != 4 && element_size_ != 8) return;
  if (element_size_ > 1 && H5Tget_order(element.get()) != H5T_ORDER_LE) return;

  Hdf5Id space(H5Dget_space(dataset), H5Sclose);
  hsize_t dims[1] = {0};
  if (space.get() < 0 || H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0) {
    return;
  }
  rows_ = dims[0];

  Hdf5Id dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (dcpl.get() < 0) return;
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_CONTIGUOUS) {
    contiguous_address_ = H5Dget_offset(dataset);
    if (contiguous_address_ == HADDR_UNDEF) return;  // never written: HDF5 supplies fill values
  } else if (layout == H5D_CHUNKED) {
    hsize_t chunk[1] = {0};
    if (H5Pget_chunk(dcpl.get(), 1, chunk) != 1 || chunk[0] == 0) return;
    chunked_ = true;
    chunk_rows_ = chunk[0];
    const int n = H5Pget_nfilters(dcpl.get());
    for (int i = 0; i < n; ++i) {
      unsigned flags = 0, config = 0;
      size_t nvalues = 0;
      const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr, 0,
                                             nullptr, &config);
      if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE) return;
      filters_.push_back(id);
    }
  } else {
    return;  // compact or virtual storage
  }

  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return;
  file_size_ = static_cast<uint64_t>(st.st_size);
  supported_ = true;
}

RawVlenReader::~RawVlenReader() {
  if (fd_ >= 0) ::close(fd_);
}

void RawVlenReader::corrupt(uint64_t row, const std::string& what) const {
  fail(Code::data, "corrupt shard: row ", row, " of ", where_, ": ", what);
}

void RawVlenReader::pread_exact(uint64_t offset, uint64_t size, void* out, const char* what) const {
  if (offset > file_size_ || size > file_size_ - offset) {
    fail(Code::data, "corrupt shard: ", where_, ": ", what, " at byte ", offset, " (", size,
         " bytes) lies beyond the end of the file (", file_size_, " bytes)");
  }
  uint8_t* dst = static_cast<uint8_t*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd_, dst, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(Code::io, "cannot read ", where_, ": ", n < 0 ? std::strerror(errno) : "unexpected end of file");
    dst += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
}

// The raw bytes of chunk `index` with its filters undone (inflate, then unshuffle).
const std::vector<uint8_t>& RawVlenReader::chunk(uint64_t index) {
  if (index == cached_chunk_) return chunk_bytes_;
  cached_chunk_ = UINT64_MAX;
  Hdf5Silence silence;
  const std::string what = where_ + " (chunk " + std::to_string(index) + ")";
  const hsize_t offset[1] = {index * chunk_rows_};
  hsize_t stored = 0;
  H5_CHECK(H5Dget_chunk_storage_size(dataset_, offset, &stored), Code::data, what);
  if (stored > file_size_) fail(Code::data, "corrupt shard: ", what, " claims ", stored, " bytes");
  std::vector<uint8_t> raw(static_cast<size_t>(stored));
  uint32_t skipped = 0;
  H5_CHECK(H5Dread_chunk(dataset_, H5P_DEFAULT, offset, &skipped, raw.data()), Code::data, what);
  const uint64_t expected = chunk_rows_ * kDescriptorBytes;
  for (size_t i = filters_.size(); i-- > 0;) {  // undo in reverse pipeline order
    if (skipped & (1u << i)) continue;
    if (filters_[i] == H5Z_FILTER_DEFLATE) {
      std::vector<uint8_t> inflated(static_cast<size_t>(expected));
      uLongf size = static_cast<uLongf>(expected);
      if (::uncompress(inflated.data(), &size, raw.data(), static_cast<uLong>(raw.size())) != Z_OK || size != expected) {
        fail(Code::data, "corrupt shard: ", what, " does not inflate to ", expected, " bytes");
      }
      raw.swap(inflated);
    } else {  // shuffle: byte b of element e was stored at b * elements + e
      if (raw.size() != expected) fail(Code::data, "corrupt shard: ", what, " has ", raw.size(), " bytes, not ", expected);
      std::vector<uint8_t> plain(raw.size());
      const uint64_t elements = chunk_rows_;
      for (uint64_t b = 0; b < kDescriptorBytes; ++b)
        for (uint64_t e = 0; e < elements; ++e) plain[e * kDescriptorBytes + b] = raw[b * elements + e];
      raw.swap(plain);
    }
  }
  if (raw.size() != expected) fail(Code::data, "corrupt shard: ", what, " has ", raw.size(), " bytes, not ", expected);
  chunk_bytes_.swap(raw);
  cached_chunk_ = index;
  return chunk_bytes_;
}

void RawVlenReader::read_descriptors(uint64_t begin, uint64_t count, std::vector<uint8_t>& out) {
  out.resize(static_cast<size_t>(count * kDescriptorBytes));
  if (!chunked_) {
    pread_exact(base_ + contiguous_address_ + begin * kDescriptorBytes, count * kDescriptorBytes, out.data(),
                "the dataset's storage");
    return;
  }
  for (uint64_t row = begin; row < begin + count;) {
    const uint64_t c = row / chunk_rows_, first = row - c * chunk_rows_;
    const uint64_t n = std::min(begin + count - row, chunk_rows_ - first);
    const std::vector<uint8_t>& bytes = chunk(c);
    std::memcpy(out.data() + (row - begin) * kDescriptorBytes, bytes.data() + first * kDescriptorBytes,
                static_cast<size_t>(n * kDescriptorBytes));
    row += n;
  }
}

const RawVlenReader::Collection& RawVlenReader::collection(uint64_t address, uint64_t row) {
  auto it = collections_.find(address);
  if (it != collections_.end()) return it->second;
  if (cached_collection_bytes_ > kCollectionCacheBytes) {
    collections_.clear();
    cached_collection_bytes_ = 0;
  }
  uint8_t header[kHeapHeaderBytes];
  if (file_size_ < kHeapHeaderBytes || address > file_size_ || base_ + address > file_size_ - kHeapHeaderBytes) {
    corrupt(row, "its heap address " + std::to_string(address) + " lies outside the file");
  }
  pread_exact(base_ + address, kHeapHeaderBytes, header, "a global heap collection");
  if (std::memcmp(header, "GCOL", 4) != 0 || header[4] != 1) {
    corrupt(row, "no global heap collection at address " + std::to_string(address));
  }
  const uint64_t size = le(header + 8, 8);
  if (size < kHeapHeaderBytes || size > kMaxCollectionBytes || size > file_size_ - base_ - address) {
    corrupt(row, "the heap collection at address " + std::to_string(address) + " claims " + std::to_string(size) +
                     " bytes");
  }
  Collection c;
  c.bytes.resize(static_cast<size_t>(size));
  pread_exact(base_ + address, size, c.bytes.data(), "a global heap collection");
  for (uint64_t off = kHeapHeaderBytes; off + 16 <= size;) {
    const uint8_t* p = c.bytes.data() + off;
    const uint32_t index = static_cast<uint32_t>(le(p, 2));
    const uint64_t object_size = le(p + 8, 8);
    if (index == 0) break;  // free space: the rest of the collection
    if (object_size > size - off - 16) {
      corrupt(row, "heap object " + std::to_string(index) + " at address " + std::to_string(address) + " claims " +
                       std::to_string(object_size) + " bytes, past its collection");
    }
    if (!c.objects.emplace(index, HeapObject{off + 16, object_size}).second) {
      corrupt(row, "heap object " + std::to_string(index) + " appears twice in the collection at address " +
                       std::to_string(address));
    }
    off += 16 + ((object_size + 7) & ~uint64_t{7});
  }
  cached_collection_bytes_ += size;
  return collections_.emplace(address, std::move(c)).first->second;
}

void RawVlenReader::read(uint64_t begin, uint64_t count, std::vector<int32_t>& values, std::vector<int64_t>& lengths) {
  values.clear();
  lengths.assign(static_cast<size_t>(count), 0);
  if (count == 0) return;
  if (begin > rows_ || count > rows_ - begin) {
    fail(Code::invalid_argument, "rows [", begin, ", ", begin + count, ") of ", where_, " exceed its ", rows_, " rows");
  }
  std::vector<uint8_t> descriptors;
  read_descriptors(begin, count, descriptors);
  for (uint64_t r = 0; r < count; ++r) {
    const uint8_t* d = descriptors.data() + r * kDescriptorBytes;
    const uint64_t length = le(d, 4), address = le(d + 4, 8);
    const uint32_t index = static_cast<uint32_t>(le(d + 12, 4));
    const uint64_t row = begin + r;
    lengths[r] = static_cast<int64_t>(length);
    if (length == 0) continue;
    const Collection& c = collection(address, row);
    const auto object = c.objects.find(index);
    if (object == c.objects.end()) {
      corrupt(row, "heap object " + std::to_string(index) + " is not in the collection at address " +
                       std::to_string(address));
    }
    if (object->second.size != length * static_cast<uint64_t>(element_size_)) {
      corrupt(row, "its sequence of " + std::to_string(length) + " values does not match heap object " +
                       std::to_string(index) + " of " + std::to_string(object->second.size) + " bytes");
    }
    const uint8_t* p = c.bytes.data() + object->second.offset;
    for (uint64_t i = 0; i < length; ++i) {
      const int64_t v = element_at(p + i * element_size_, element_size_, element_signed_);
      if (v < INT32_MIN || v > INT32_MAX) corrupt(row, "value " + std::to_string(v) + " does not fit in 32 bits");
      values.push_back(static_cast<int32_t>(v));
    }
  }
}

}  // namespace bert
