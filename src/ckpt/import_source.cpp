// Reading import sources (safetensors with HF/DLE names, TF tensor bundles) into SourceTensors.
#include "ckpt/import_source.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckpt/hf_interop.h"
#include "ckpt/safetensors.h"
#include "ckpt/tf_bundle.h"
#include "ckpt/tf_names.h"
#include "core/error.h"

namespace bert {
namespace {

namespace fs = std::filesystem;

CheckpointTensor transpose(const CheckpointTensor& t) {
  CheckpointTensor out;
  const int64_t rows = t.shape[0], cols = t.shape[1];
  out.shape = {cols, rows};
  out.data.resize(t.data.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out.data[c * rows + r] = t.data[r * cols + c];
  }
  return out;
}

bool is_dle_name(const std::string& name) {
  return name.rfind("module.", 0) == 0 || name.find(".dense_act.") != std::string::npos ||
         name.find("LayerNorm.gamma") != std::string::npos || name.find("LayerNorm.beta") != std::string::npos;
}

ImportSource read_tf_source(const std::string& prefix) {
  ImportSource src;
  src.kind = "tensorflow checkpoint";
  src.producer = "Google BERT (TensorFlow)";
  src.path = prefix;
  const fs::path beside = fs::path(prefix).parent_path() / "bert_config.json";
  std::error_code ec;
  if (fs::is_regular_file(beside, ec)) src.config_path = beside.string();
  const TfBundle bundle = read_tf_bundle(prefix);
  for (const TfBundleEntry& e : bundle.entries) {
    SourceTensor t;
    t.name = e.name;
    t.dtype = tf_dtype_name(e.dtype);
    t.shape = e.shape;
    TfNameMapping m;
    if (map_tf_bert_name(e.name, m)) {
      if (m.transpose && e.shape.size() != 2) {
        fail(Code::checkpoint, "'", prefix, ".index' tensor '", e.name, "' is a kernel of rank ", e.shape.size(),
             "; BERT's kernels are matrices");
      }
      t.target = m.target;
      t.group = m.group;
      t.transposed = m.transpose;
      t.value = read_tf_tensor(bundle, e);
      if (m.transpose) t.value = transpose(t.value);
    } else if (e.name == "global_step" && e.shape.empty() && tf_dtype_name(e.dtype) == "int64") {
      std::memcpy(&src.global_step, read_tf_bytes(bundle, e).data(), sizeof src.global_step);
    }
    src.tensors.push_back(std::move(t));
  }
  return src;
}

ImportSource read_safetensors_source(const std::string& source) {
  ImportSource src;
  src.kind = "safetensors";
  src.path = source;
  std::error_code ec;
  if (fs::is_directory(source, ec)) {
    src.path = (fs::path(source) / "model.safetensors").string();
    src.config_path = (fs::path(source) / "config.json").string();
    if (!fs::exists(src.path, ec)) {
      fail(Code::io, "'", source, "' has no model.safetensors (convert pytorch_model.bin with "
           "src/tools/torch_to_safetensors.py first)");
    }
    if (!fs::exists(src.config_path, ec)) src.config_path.clear();
  }
  if (is_pytorch_file(src.path)) {
    fail(Code::unsupported, "'", src.path, "' is a PyTorch file (pytorch_model.bin or a DLE .pt): convert it with "
         "python3 src/tools/torch_to_safetensors.py first");
  }
  std::map<std::string, std::string> dtypes;
  TensorMap tensors = read_safetensors(src.path, &dtypes);
  bool dle = false;
  for (auto& [name, value] : tensors) {
    SourceTensor t;
    t.name = name;
    t.dtype = dtypes[name];
    t.shape = value.shape;
    t.target = canonical_param_name(name);
    t.group = "model";
    t.value = std::move(value);
    dle = dle || is_dle_name(name);
    src.tensors.push_back(std::move(t));
  }
  src.producer = dle ? "NVIDIA DLE" : "Hugging Face";
  return src;
}

}  // namespace

bool is_pytorch_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  in.read(head, 4);
  const bool zip = in.gcount() == 4 && std::memcmp(head, "PK\x03\x04", 4) == 0;  // torch.save since 1.6
  const bool pickle = in.gcount() >= 2 && static_cast<unsigned char>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5;
  return zip || pickle;
}

ImportSource read_import_source(const std::string& source) {
  const std::string prefix = tf_checkpoint_prefix(source);
  if (!prefix.empty()) return read_tf_source(prefix);
  std::error_code ec;
  if (!fs::exists(source, ec)) fail(Code::io, "import source '", source, "' does not exist");
  return read_safetensors_source(source);
}

}  // namespace bert
