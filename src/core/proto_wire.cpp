// Protocol-buffer wire-format reading (https://protobuf.dev/programming-guides/encoding/).
#include "core/proto_wire.h"

#include <cstring>

namespace bert {

bool read_varint(const char*& p, const char* end, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p >= end) return false;
    const auto byte = static_cast<unsigned char>(*p++);
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

void ProtoReader::malformed(const std::string& why) const { fail(code_, context_, ": malformed protobuf (", why, ")"); }

bool ProtoReader::next(ProtoField& field) {
  if (p_ == end_) return false;
  uint64_t key = 0;
  if (!read_varint(p_, end_, key)) malformed("truncated field key");
  field.number = static_cast<uint32_t>(key >> 3);
  field.wire_type = static_cast<int>(key & 7);
  field.bytes = {};
  if (field.number == 0) malformed("field number 0");
  switch (field.wire_type) {
    case 0:
      if (!read_varint(p_, end_, field.value)) malformed("truncated varint in field " + std::to_string(field.number));
      break;
    case 1:
    case 5: {
      const size_t width = field.wire_type == 1 ? 8 : 4;
      if (static_cast<size_t>(end_ - p_) < width) malformed("truncated fixed field " + std::to_string(field.number));
      field.value = 0;
      std::memcpy(&field.value, p_, width);  // little-endian hosts
      p_ += width;
      break;
    }
    case 2: {
      uint64_t n = 0;
      if (!read_varint(p_, end_, n) || n > static_cast<uint64_t>(end_ - p_)) {
        malformed("length of field " + std::to_string(field.number) + " runs past the end");
      }
      field.bytes = std::string_view(p_, n);
      p_ += n;
      break;
    }
    default:
      malformed("unsupported wire type " + std::to_string(field.wire_type) + " in field " + std::to_string(field.number));
  }
  return true;
}

}  // namespace bert
