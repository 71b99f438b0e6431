// Sorted-string table reading: footer -> index block -> data blocks, each checked by its CRC.
#include "ckpt/sstable.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/proto_wire.h"

namespace bert {
namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kFooterSize = 48;   // two BlockHandles padded to 40 bytes, then the magic
constexpr size_t kTrailerSize = 5;   // compression type + masked CRC-32C

struct BlockHandle {
  uint64_t offset = 0, size = 0;
};

uint32_t load_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

class TableFile {
 public:
  explicit TableFile(const std::string& path) : path_(path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(Code::io, "cannot open '", path, "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    bytes_ = ss.str();
  }

  [[noreturn]] void corrupt(const std::string& why) const {
    fail(Code::checkpoint, "'", path_, "' is not a valid TensorFlow checkpoint index: ", why);
  }

  BlockHandle decode_handle(const char*& p, const char* end, const std::string& what) const {
    BlockHandle h;
    if (!read_varint(p, end, h.offset) || !read_varint(p, end, h.size)) corrupt("malformed block handle in " + what);
    return h;
  }

  std::string_view footer_index_handle_block() {
    if (bytes_.size() < kFooterSize) corrupt("file of " + std::to_string(bytes_.size()) + " bytes is too short (truncated?)");
    const char* footer = bytes_.data() + bytes_.size() - kFooterSize;
    uint64_t magic;
    std::memcpy(&magic, footer + 40, 8);
    if (magic != kTableMagic) corrupt("bad magic number at the end of the file (truncated or not an .index file?)");
    const char* p = footer;
    decode_handle(p, footer + 40, "the footer");  // metaindex: unused by tensor bundles
    const BlockHandle index = decode_handle(p, footer + 40, "the footer");
    return block(index, "the index block");
  }

  // The contents of a block after its trailer is checked.
  std::string_view block(const BlockHandle& h, const std::string& what) const {
    if (h.offset > bytes_.size() || h.size > bytes_.size() - h.offset || bytes_.size() - h.offset - h.size < kTrailerSize) {
      corrupt(what + " at offset " + std::to_string(h.offset) + " lies outside the file (truncated?)");
    }
    const char* data = bytes_.data() + h.offset;
    const char type = data[h.size];
    const uint32_t stored = load_u32(data + h.size + 1);
    if (crc32c_mask(crc32c(data, h.size + 1)) != stored) {
      corrupt(what + " at offset " + std::to_string(h.offset) + " fails its CRC-32C check (corrupt file)");
    }
    if (type != 0) corrupt(what + " is compressed (type " + std::to_string(int(type)) + "); only uncompressed tables are read");
    return {data, h.size};
  }

  // Walks a block's entries in order, rebuilding each key from its shared prefix.
  template <typename Visit>
  void for_each_entry(std::string_view block, const std::string& what, Visit visit) const {
    if (block.size() < 4) corrupt(what + " is too short");
    const uint32_t restarts = load_u32(block.data() + block.size() - 4);
    if (restarts == 0 || (block.size() - 4) / 4 < restarts) corrupt(what + " has a bad restart count");
    const char* p = block.data();
    const char* end = block.data() + block.size() - 4 - 4 * static_cast<size_t>(restarts);
    std::string key;
    while (p < end) {
      uint64_t shared = 0, unshared = 0, value_size = 0;
      if (!read_varint(p, end, shared) || !read_varint(p, end, unshared) || !read_varint(p, end, value_size) ||
          shared > key.size() || unshared > static_cast<uint64_t>(end - p) ||
          value_size > static_cast<uint64_t>(end - p) - unshared) {
        corrupt("malformed entry in " + what + " after key '" + key + "'");
      }
      key.resize(shared);
      key.append(p, unshared);
      p += unshared;
      visit(key, std::string_view(p, value_size));
      p += value_size;
    }
  }

 private:
  std::string path_;
  std::string bytes_;
};

}  // namespace

std::vector<std::pair<std::string, std::string>> read_sstable(const std::string& path) {
  TableFile file(path);
  std::vector<std::pair<std::string, std::string>> out;
  const std::string_view index = file.footer_index_handle_block();
  file.for_each_entry(index, "the index block", [&](const std::string& last_key, std::string_view value) {
    const char* p = value.data();
    const BlockHandle h = file.decode_handle(p, value.data() + value.size(), "the index block");
    const std::string what = "the data block ending at key '" + last_key + "'";
    file.for_each_entry(file.block(h, what), what, [&](const std::string& key, std::string_view v) {
      if (!out.empty() && key <= out.back().first) file.corrupt("keys out of order at '" + key + "'");
      out.emplace_back(key, std::string(v));
    });
  });
  return out;
}

}  // namespace bert
