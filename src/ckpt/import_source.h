// The weights an import starts from, read from any supported source into one listing: each
// source tensor with its stored name, dtype and shape, the engine (Hugging Face) name it maps
// to, and its fp32 value in the engine's layout. Sources: a Hugging Face folder (config.json +
// model.safetensors), a .safetensors file with HF or NVIDIA DLE names (DLE/HF PyTorch files
// converted by src/tools/torch_to_safetensors.py), and a TensorFlow 1 checkpoint (PREFIX.index +
// PREFIX.data-*) with Google BERT's variable names and optional Adam/LAMB slots.
#pragma once

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"

namespace bert {

struct SourceTensor {
  std::string name;             // as stored in the source
  std::string dtype;            // as stored ("F32", "float32", ...)
  std::vector<int64_t> shape;   // as stored
  std::string target;           // engine name, "" when the tensor maps to nothing
  std::string group;            // "model", "exp_avg" or "exp_avg_sq" (empty when unmapped)
  bool transposed = false;      // value is the transpose of the stored tensor
  CheckpointTensor value;       // fp32, in the target's layout
};

struct ImportSource {
  std::string kind;         // "safetensors" or "tensorflow checkpoint"
  std::string producer;     // "Hugging Face", "NVIDIA DLE" or "Google BERT (TensorFlow)"
  std::string path;         // the weights file (a TF checkpoint: its prefix)
  std::string config_path;  // a bert_config.json found beside it, or ""
  std::vector<SourceTensor> tensors;
  int64_t global_step = -1;  // a TF checkpoint's global_step, when present
};

// Throws Error(io) if `source` cannot be found or read, Error(checkpoint) naming the file and
// tensor if it is malformed or fails a checksum.
ImportSource read_import_source(const std::string& source);

// True for files torch.save writes (a zip archive, or a legacy pickle), which need conversion.
bool is_pytorch_file(const std::string& path);

}  // namespace bert
