// Hugging Face / NVIDIA DLE export and import (name mapping, config.json, safetensors).
#include "ckpt/hf_interop.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "core/error.h"
#include "model/param_table.h"

namespace bert {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

}  // namespace

std::string canonical_param_name(const std::string& source_name) {
  std::string n = source_name;
  while (n.rfind("module.", 0) == 0) n = n.substr(7);
  if (n.rfind("bert.", 0) != 0 && n.rfind("cls.", 0) != 0) n = "bert." + n;
  replace_all(n, ".dense_act.", ".dense.");
  if (n.find("LayerNorm.") != std::string::npos) {
    if (ends_with(n, ".gamma")) n = n.substr(0, n.size() - 6) + ".weight";
    if (ends_with(n, ".beta")) n = n.substr(0, n.size() - 5) + ".bias";
  }
  if (n == "cls.predictions.decoder.weight") return "";  // tied to the word embeddings
  if (n == "cls.predictions.decoder.bias") return "cls.predictions.bias";
  return n;
}

void export_hf_folder(const std::string& checkpoint_path, const std::string& folder) {
  CheckpointContents c = read_checkpoint(checkpoint_path);
  nlohmann::json engine_config;
  try {
    engine_config = nlohmann::json::parse(c.config_json);
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", checkpoint_path, "' has a malformed config: ", e.what());
  }
  BertConfig model = parse_bert_config(engine_config.at("model"), "model");
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) fail(Code::io, "cannot create folder '", folder, "': ", ec.message());

  nlohmann::json hf = model.to_json();
  hf["architectures"] = {"BertForPreTraining"};
  hf["model_type"] = "bert";
  hf["pad_token_id"] = 0;
  hf["position_embedding_type"] = "absolute";
  hf["torch_dtype"] = "float32";
  const std::string config_path = (fs::path(folder) / "config.json").string();
  std::ofstream(config_path) << hf.dump(2) << "\n";
  if (!fs::exists(config_path)) fail(Code::io, "cannot write '", config_path, "'");
  write_safetensors((fs::path(folder) / "model.safetensors").string(), c.model,
                    {{"format", "pt"}, {"source", "bertengine " BERT_VERSION_STRING}});
}

ImportReport import_weights(const std::string& source, const std::string& config_path, const std::string& output) {
  std::string weights = source, cfg = config_path;
  if (fs::is_directory(source)) {
    weights = (fs::path(source) / "model.safetensors").string();
    if (cfg.empty()) cfg = (fs::path(source) / "config.json").string();
    if (!fs::exists(weights)) {
      fail(Code::io, "'", source, "' has no model.safetensors (convert pytorch_model.bin with "
           "src/tools/torch_to_safetensors.py first)");
    }
  }
  if (cfg.empty()) fail(Code::invalid_argument, "importing '", source, "' needs its bert_config.json (--config)");
  std::ifstream in(cfg);
  if (!in) fail(Code::io, "cannot open config '", cfg, "'");
  nlohmann::json config_json;
  try {
    config_json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(Code::config, "'", cfg, "' is not valid JSON: ", e.what());
  }
  ImportReport report;
  report.config = parse_bert_config(config_json, "model (" + cfg + ")");

  TensorMap source_tensors = read_safetensors(weights);
  ParamTable table(report.config);
  TensorMap placed;
  for (auto& [name, tensor] : source_tensors) {
    const std::string target = canonical_param_name(name);
    if (target.empty()) continue;
    if (table.find(target) < 0) {
      report.unplaced.push_back(name);
      continue;
    }
    if (!placed.count(target)) placed[target] = std::move(tensor);
  }
  std::vector<float> flat(table.total_elems, 0.0f);
  load_tensors(table, placed, weights, "model", flat.data());

  CheckpointContents c;
  c.config_json = nlohmann::json({{"model", report.config.to_json()}}).dump();
  c.state = {{"imported_from", source}};
  c.model = tensors_of(table, flat.data());
  write_checkpoint(output, c);
  return report;
}

}  // namespace bert
