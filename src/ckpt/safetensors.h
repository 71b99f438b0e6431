// The safetensors format (Hugging Face): 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the raw tensor bytes.
// We write F32 and read F32, F16 and BF16 (converted to fp32).
#pragma once

#include <map>
#include <string>

#include "ckpt/checkpoint.h"

namespace bert {

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata);
// Throws Error(io) if unreadable, Error(checkpoint) naming the file and tensor if malformed.
// `dtypes`, when given, receives each tensor's stored dtype ("F32", "F16", "BF16").
TensorMap read_safetensors(const std::string& path, std::map<std::string, std::string>* dtypes = nullptr);

}  // namespace bert
