// Tensor-bundle reading: the index table's entries decoded from protobuf, tensor bytes from the
// data shards checked against their CRC-32C and converted to fp32.
#include "ckpt/tf_bundle.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckpt/sstable.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/half.h"
#include "core/proto_wire.h"

namespace bert {
namespace {

namespace fs = std::filesystem;

enum TfDtype { kFloat = 1, kDouble = 2, kInt32 = 3, kInt64 = 9, kBfloat16 = 14, kHalf = 19 };

size_t dtype_width(int dtype) {
  switch (dtype) {
    case kFloat: case kInt32: return 4;
    case kDouble: case kInt64: return 8;
    case kBfloat16: case kHalf: return 2;
    default: return 0;
  }
}

std::vector<int64_t> parse_shape(std::string_view message, const std::string& context) {
  std::vector<int64_t> shape;
  ProtoReader r(message, context + " shape", Code::checkpoint);
  ProtoField f;
  while (r.next(f)) {
    if (f.number == 3 && f.wire_type == 0 && f.value) r.malformed("unknown rank");
    if (f.number != 2 || f.wire_type != 2) continue;  // TensorShapeProto.dim
    ProtoReader dim(f.bytes, context + " dimension", Code::checkpoint);
    ProtoField d;
    int64_t size = 0;
    while (dim.next(d)) {
      if (d.number == 1 && d.wire_type == 0) size = static_cast<int64_t>(d.value);
    }
    if (size < 0) r.malformed("negative dimension");
    shape.push_back(size);
  }
  return shape;
}

TfBundleEntry parse_entry(const std::string& name, std::string_view message, const std::string& index_path) {
  const std::string context = "'" + index_path + "' entry '" + name + "'";
  TfBundleEntry e;
  e.name = name;
  ProtoReader r(message, context, Code::checkpoint);
  ProtoField f;
  while (r.next(f)) {
    switch (f.number) {
      case 1: e.dtype = static_cast<int>(f.value); break;
      case 2: e.shape = parse_shape(f.bytes, context); break;
      case 3: e.shard_id = static_cast<int>(f.value); break;
      case 4: e.offset = f.value; break;
      case 5: e.size = f.value; break;
      case 6: e.masked_crc32c = static_cast<uint32_t>(f.value); break;
      case 7: e.sliced = true; break;
      default: break;
    }
  }
  return e;
}

std::string data_file(const TfBundle& bundle, int shard) {
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".data-%05d-of-%05d", shard, bundle.num_shards);
  return bundle.prefix + suffix;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string tf_checkpoint_prefix(const std::string& source) {
  std::error_code ec;
  if (ends_with(source, ".index") && fs::is_regular_file(source, ec)) return source.substr(0, source.size() - 6);
  if (!fs::exists(source, ec) && fs::is_regular_file(source + ".index", ec)) return source;
  return "";
}

std::string tf_dtype_name(int dtype) {
  switch (dtype) {
    case kFloat: return "float32";
    case kDouble: return "float64";
    case kInt32: return "int32";
    case kInt64: return "int64";
    case kBfloat16: return "bfloat16";
    case kHalf: return "float16";
    case 7: return "string";
    case 10: return "bool";
    default: return "dtype " + std::to_string(dtype);
  }
}

TfBundle read_tf_bundle(const std::string& prefix) {
  const std::string index_path = prefix + ".index";
  TfBundle bundle;
  bundle.prefix = prefix;
  bool have_header = false;
  for (const auto& [key, value] : read_sstable(index_path)) {
    if (key.empty()) {
      ProtoReader r(value, "'" + index_path + "' header", Code::checkpoint);
      ProtoField f;
      while (r.next(f)) {
        if (f.number == 1 && f.wire_type == 0) bundle.num_shards = static_cast<int>(f.value);
        if (f.number == 2 && f.wire_type == 0 && f.value != 0) {
          fail(Code::checkpoint, "'", index_path, "' was written on a big-endian machine; only little-endian bundles are read");
        }
      }
      have_header = true;
      continue;
    }
    TfBundleEntry e = parse_entry(key, value, index_path);
    if (!e.sliced && (e.shard_id < 0 || e.shard_id >= bundle.num_shards)) {
      fail(Code::checkpoint, "'", index_path, "' entry '", key, "' names data shard ", e.shard_id, " of ", bundle.num_shards);
    }
    bundle.entries.push_back(std::move(e));
  }
  if (!have_header) fail(Code::checkpoint, "'", index_path, "' has no bundle header (not a TensorFlow checkpoint index?)");
  if (bundle.num_shards < 1) fail(Code::checkpoint, "'", index_path, "' has ", bundle.num_shards, " data shards");
  return bundle;
}

std::vector<char> read_tf_bytes(const TfBundle& bundle, const TfBundleEntry& e) {
  const std::string file = data_file(bundle, e.shard_id);
  const std::string what = "'" + file + "' tensor '" + e.name + "'";
  if (e.sliced) fail(Code::unsupported, what, " is a partitioned variable; only whole tensors are read");
  const size_t width = dtype_width(e.dtype);
  if (width == 0) fail(Code::unsupported, what, " has dtype ", tf_dtype_name(e.dtype), ", which is not read");
  size_t count = 1;
  for (int64_t d : e.shape) count *= static_cast<size_t>(d);
  if (e.size != count * width) {
    fail(Code::checkpoint, what, " has ", e.size, " bytes but its shape and dtype need ", count * width);
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(Code::io, "cannot open '", file, "' (the data shard of tensor '", e.name, "')");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  if (e.offset > file_size || e.size > file_size - e.offset) {
    fail(Code::checkpoint, what, " lies past the end of the file (", file_size, " bytes; truncated?)");
  }
  std::vector<char> raw(e.size);
  in.seekg(static_cast<std::streamoff>(e.offset));
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (!in) fail(Code::io, "reading ", what, " failed");
  if (crc32c_mask(crc32c(raw.data(), raw.size())) != e.masked_crc32c) {
    fail(Code::checkpoint, what, " fails its CRC-32C check (corrupt file)");
  }
  return raw;
}

CheckpointTensor read_tf_tensor(const TfBundle& bundle, const TfBundleEntry& e) {
  const std::vector<char> raw = read_tf_bytes(bundle, e);
  const size_t width = dtype_width(e.dtype), count = raw.size() / width;
  CheckpointTensor t;
  t.shape = e.shape;
  t.data.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const char* p = raw.data() + i * width;
    switch (e.dtype) {
      case kFloat: std::memcpy(&t.data[i], p, 4); break;
      case kDouble: { double v; std::memcpy(&v, p, 8); t.data[i] = static_cast<float>(v); break; }
      case kInt32: { int32_t v; std::memcpy(&v, p, 4); t.data[i] = static_cast<float>(v); break; }
      case kInt64: { int64_t v; std::memcpy(&v, p, 8); t.data[i] = static_cast<float>(v); break; }
      case kBfloat16: { uint16_t v; std::memcpy(&v, p, 2); t.data[i] = bf16_bits_to_float(v); break; }
      case kHalf: { uint16_t v; std::memcpy(&v, p, 2); t.data[i] = fp16_bits_to_float(v); break; }
      default: break;
    }
  }
  return t;
}

}  // namespace bert
