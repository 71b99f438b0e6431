// safetensors reading and writing (little-endian hosts, as every supported platform is).
#include "ckpt/safetensors.h"

#include <cstdint>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace bert {
namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const size_t bytes = t.data.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(Code::io, "cannot create '", path, "'");
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(n));
  for (const auto& [name, t] : tensors) {
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size() * sizeof(float)));
  }
  out.flush();
  if (!out) fail(Code::io, "writing '", path, "' failed (disk full?)");
}

TensorMap read_safetensors(const std::string& path, std::map<std::string, std::string>* dtypes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Code::io, "cannot open '", path, "'");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  if (!in || n > file_size - 8) fail(Code::checkpoint, "'", path, "' is not a safetensors file (bad header length)");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "'", path, "' has a malformed safetensors header: ", e.what());
  }
  if (!header.is_object()) fail(Code::checkpoint, "'", path, "' has a safetensors header that is not a JSON object");
  const uint64_t data_start = 8 + n;
  TensorMap out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    try {
      const std::string dtype = it->at("dtype").get<std::string>();
      // Offsets and dimensions are non-negative JSON integers (a float such as 1.7e20 would not
      // convert to an integer type at all).
      auto index = [&](const nlohmann::json& v, const char* what) -> uint64_t {
        if (!v.is_number_unsigned()) {
          fail(Code::checkpoint, "'", path, "' tensor '", name, "' has ", what, " ", v.dump(),
               ", not a non-negative integer");
        }
        return v.get<uint64_t>();
      };
      const uint64_t begin = index(it->at("data_offsets").at(0), "data offset");
      const uint64_t end = index(it->at("data_offsets").at(1), "data offset");
      CheckpointTensor t;
      size_t count = 1;
      for (const auto& d : it->at("shape")) {
        const uint64_t dim = index(d, "shape dimension");
        if (dim > uint64_t{INT64_MAX} || __builtin_mul_overflow(count, static_cast<size_t>(dim), &count)) {
          fail(Code::checkpoint, "'", path, "' tensor '", name, "' has an impossible shape dimension ", dim);
        }
        t.shape.push_back(static_cast<int64_t>(dim));
      }
      const size_t width = dtype == "F32" ? 4 : (dtype == "F16" || dtype == "BF16") ? 2 : 0;
      if (width == 0) fail(Code::checkpoint, "'", path, "' tensor '", name, "' has unsupported dtype ", dtype);
      if (end < begin || count > (end - begin) / width || end - begin != count * width || end > file_size - data_start) {
        fail(Code::checkpoint, "'", path, "' tensor '", name, "' has inconsistent offsets (truncated file?)");
      }
      std::vector<char> raw(end - begin);
      in.seekg(static_cast<std::streamoff>(data_start + begin));
      in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
      t.data.resize(count);
      for (size_t i = 0; i < count; ++i) {
        if (width == 4) {
          std::memcpy(&t.data[i], raw.data() + 4 * i, 4);
        } else {
          uint16_t h;
          std::memcpy(&h, raw.data() + 2 * i, 2);
          if (dtype == "F16") {
            t.data[i] = half_to_float(h);
          } else {
            const uint32_t bits = static_cast<uint32_t>(h) << 16;
            std::memcpy(&t.data[i], &bits, 4);
          }
        }
      }
      out[name] = std::move(t);
      if (dtypes) (*dtypes)[name] = dtype;
    } catch (const nlohmann::json::exception& e) {
      fail(Code::checkpoint, "'", path, "' tensor '", name, "' has a malformed header entry: ", e.what());
    }
  }
  if (!in) fail(Code::checkpoint, "'", path, "' is truncated");
  return out;
}

}  // namespace bert
