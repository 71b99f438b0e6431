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

}  // namespace bert
