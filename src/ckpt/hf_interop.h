// Hugging Face interop: export a checkpoint to a model folder (config.json with
// architectures ["BertForPreTraining"] + model.safetensors under HF names and the original
// vocabulary size), and import weights from HF folders, safetensors files, or NVIDIA DLE
// state dicts (names `dense_act`, LayerNorm `gamma`/`beta`, a `module.` prefix) converted to
// safetensors by src/tools/torch_to_safetensors.py.
#pragma once

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/bert_config.h"

namespace bert {

void export_hf_folder(const std::string& checkpoint_path, const std::string& folder);

struct ImportReport {
  BertConfig config;
  std::vector<std::string> unplaced;  // source tensors that map to no model parameter
};

// Reads `source` (an HF folder with config.json and model.safetensors, or a .safetensors file
// with `config_path` naming its bert_config.json), maps names, verifies every parameter is
// present with the right shape (error naming the tensor otherwise), and writes a weights-only
// checkpoint to `output`. Source tensors that place nowhere are reported, not fatal.
ImportReport import_weights(const std::string& source, const std::string& config_path, const std::string& output);

// The engine's name for a source tensor name (HF or DLE spelling), or "" for tied copies.
std::string canonical_param_name(const std::string& source_name);

}  // namespace bert
