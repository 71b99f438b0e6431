// TFRecord framing (CRC-checked) and tf.train.Example decoding.
#include "prep/tfrecord.h"

#include <cstring>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/proto_wire.h"

namespace bert {

TfRecordReader::TfRecordReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) fail(Code::io, "cannot open TFRecord file '", path, "'");
}

bool TfRecordReader::next(std::string& record) {
  char header[12];
  in_.read(header, sizeof header);
  const auto got = static_cast<size_t>(in_.gcount());
  const std::string where = "TFRecord file '" + path_ + "' record " + std::to_string(index_) + " (byte " +
                            std::to_string(offset_) + ")";
  if (got == 0) return false;
  if (got < sizeof header) fail(Code::data, where, " is truncated in its length header");
  uint64_t length;
  uint32_t length_crc;
  std::memcpy(&length, header, 8);
  std::memcpy(&length_crc, header + 8, 4);
  if (crc32c_mask(crc32c(header, 8)) != length_crc) fail(Code::data, where, " fails the CRC-32C check of its length");
  if (length > (1ull << 31)) fail(Code::data, where, " claims an implausible length of ", length, " bytes");
  record.resize(length);
  in_.read(record.data(), static_cast<std::streamsize>(length));
  uint32_t data_crc = 0;
  if (static_cast<uint64_t>(in_.gcount()) == length) in_.read(reinterpret_cast<char*>(&data_crc), 4);
  if (!in_) fail(Code::data, where, " is truncated (", length, " data bytes announced)");
  if (crc32c_mask(crc32c(record.data(), record.size())) != data_crc) {
    fail(Code::data, where, " fails the CRC-32C check of its data (corrupt file)");
  }
  ++index_;
  offset_ += 16 + length;
  return true;
}

size_t ExampleFeature::size() const {
  switch (kind) {
    case Kind::bytes: return bytes.size();
    case Kind::floats: return floats.size();
    default: return int64s.size();
  }
}

const char* ExampleFeature::kind_name() const {
  switch (kind) {
    case Kind::bytes: return "bytes";
    case Kind::floats: return "float";
    default: return "int64";
  }
}

namespace {

// The values of a FloatList/Int64List/BytesList message (field 1, packed or one per field).
void parse_list(std::string_view message, ExampleFeature& f, const std::string& context) {
  ProtoReader r(message, context, Code::data);
  ProtoField field;
  while (r.next(field)) {
    if (field.number != 1) continue;
    if (f.kind == ExampleFeature::Kind::bytes) {
      if (field.wire_type != 2) r.malformed("bytes value with wire type " + std::to_string(field.wire_type));
      f.bytes.emplace_back(field.bytes);
    } else if (f.kind == ExampleFeature::Kind::floats) {
      if (field.wire_type == 5) {
        float v;
        const auto bits = static_cast<uint32_t>(field.value);
        std::memcpy(&v, &bits, 4);
        f.floats.push_back(v);
      } else if (field.wire_type == 2) {
        if (field.bytes.size() % 4) r.malformed("packed floats of " + std::to_string(field.bytes.size()) + " bytes");
        const size_t n = field.bytes.size() / 4, at = f.floats.size();
        f.floats.resize(at + n);
        if (n) std::memcpy(f.floats.data() + at, field.bytes.data(), n * 4);  // empty list: data() may be null
      } else {
        r.malformed("float value with wire type " + std::to_string(field.wire_type));
      }
    } else {
      if (field.wire_type == 0) {
        f.int64s.push_back(static_cast<int64_t>(field.value));
      } else if (field.wire_type == 2) {
        const char* p = field.bytes.data();
        const char* end = p + field.bytes.size();
        while (p < end) {
          uint64_t v;
          if (!read_varint(p, end, v)) r.malformed("truncated packed int64 list");
          f.int64s.push_back(static_cast<int64_t>(v));
        }
      } else {
        r.malformed("int64 value with wire type " + std::to_string(field.wire_type));
      }
    }
  }
}

ExampleFeature parse_feature(std::string_view message, const std::string& context) {
  ExampleFeature f;
  ProtoReader r(message, context, Code::data);
  ProtoField field;
  while (r.next(field)) {
    if (field.number < 1 || field.number > 3 || field.wire_type != 2) continue;
    f.kind = field.number == 1 ? ExampleFeature::Kind::bytes
             : field.number == 2 ? ExampleFeature::Kind::floats : ExampleFeature::Kind::int64s;
    parse_list(field.bytes, f, context);
  }
  return f;  // a Feature with no list set reads as an empty int64 list
}

}  // namespace

Example parse_example(const std::string& record, const std::string& context) {
  Example example;
  ProtoReader r(record, context, Code::data);
  ProtoField field;
  while (r.next(field)) {
    if (field.number != 1 || field.wire_type != 2) continue;  // Example.features
    ProtoReader features(field.bytes, context, Code::data);
    ProtoField entry;
    while (features.next(entry)) {
      if (entry.number != 1 || entry.wire_type != 2) continue;  // Features.feature (map entry)
      ProtoReader kv(entry.bytes, context, Code::data);
      ProtoField part;
      std::string key;
      std::string_view value;
      while (kv.next(part)) {
        if (part.number == 1 && part.wire_type == 2) key = std::string(part.bytes);
        if (part.number == 2 && part.wire_type == 2) value = part.bytes;
      }
      example[key] = parse_feature(value, context + " feature '" + key + "'");
    }
  }
  return example;
}

}  // namespace bert
