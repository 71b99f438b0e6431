// TensorFlow -> Hugging Face name mapping for BERT checkpoints.
#include "ckpt/tf_names.h"

#include <cctype>
#include <vector>

namespace bert {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == sep) {
      parts.emplace_back();
    } else {
      parts.back().push_back(c);
    }
  }
  return parts;
}

bool is_layer(const std::string& part) {
  if (part.rfind("layer_", 0) != 0 || part.size() == 6) return false;
  for (size_t i = 6; i < part.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(part[i]))) return false;
  }
  return true;
}

}  // namespace

bool map_tf_bert_name(const std::string& tf_name, TfNameMapping& out) {
  std::vector<std::string> parts = split(tf_name, '/');
  out = TfNameMapping{};
  out.group = "model";
  if (parts.size() > 1 && (parts.back() == "adam_m" || parts.back() == "adam_v")) {
    out.group = parts.back() == "adam_m" ? "exp_avg" : "exp_avg_sq";
    parts.pop_back();
  }
  if (parts.size() < 2 || (parts[0] != "bert" && parts[0] != "cls")) return false;
  std::string& last = parts.back();
  if (last == "kernel") {
    last = "weight";
    out.transpose = true;
  } else if (last == "gamma") {
    last = "weight";
  } else if (last == "beta") {
    last = "bias";
  } else if (last.size() > 11 && last.compare(last.size() - 11, 11, "_embeddings") == 0) {
    parts.emplace_back("weight");
  } else if (parts[0] == "cls" && last == "output_bias") {
    last = "bias";
  } else if (parts[0] == "cls" && last == "output_weights") {
    last = "weight";
  }
  for (std::string& p : parts) {
    if (is_layer(p)) p = "layer." + p.substr(6);
    out.target += (out.target.empty() ? "" : ".") + p;
  }
  return true;
}

std::string tf_bert_name(const std::string& hf_name) {
  std::vector<std::string> parts = split(hf_name, '.');
  std::string& last = parts.back();
  const std::string& owner = parts.size() > 1 ? parts[parts.size() - 2] : last;
  if (hf_name == "cls.predictions.bias") {
    last = "output_bias";
  } else if (parts.size() == 3 && parts[0] == "cls" && parts[1] == "seq_relationship") {
    last = last == "weight" ? "output_weights" : "output_bias";
  } else if (owner == "LayerNorm") {
    last = last == "weight" ? "gamma" : "beta";
  } else if (last == "weight" && owner.size() > 11 && owner.compare(owner.size() - 11, 11, "_embeddings") == 0) {
    parts.pop_back();
  } else if (last == "weight") {
    last = "kernel";
  }
  std::string name;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool layer_index = i > 0 && parts[i - 1] == "layer";
    if (parts[i] == "layer" && i + 1 < parts.size()) continue;  // "layer.3" -> "layer_3"
    name += (name.empty() ? "" : "/") + (layer_index ? "layer_" + parts[i] : parts[i]);
  }
  return name;
}

}  // namespace bert
