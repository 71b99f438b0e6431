// BertConfig parsing: presets, bert_config.json files and inline objects, strictly validated.
#include "model/bert_config.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/error.h"
#include "core/json_reader.h"

namespace bert {
namespace {

BertConfig preset(const std::string& name, const std::string& key) {
  struct Shape { int layers, hidden, heads; };
  static const std::map<std::string, Shape> presets = {
      {"bert-tiny", {2, 128, 2}},   {"bert-mini", {4, 256, 4}},     {"bert-small", {4, 512, 8}},
      {"bert-medium", {8, 512, 8}}, {"bert-base", {12, 768, 12}},   {"bert-large", {24, 1024, 16}},
  };
  auto it = presets.find(name);
  if (it == presets.end()) {
    fail(Code::config, "config key '", key, "': unknown model preset \"", name,
         "\" (presets: bert-tiny, bert-mini, bert-small, bert-medium, bert-base, bert-large)");
  }
  BertConfig c;
  c.num_hidden_layers = it->second.layers;
  c.hidden_size = it->second.hidden;
  c.num_attention_heads = it->second.heads;
  c.intermediate_size = 4 * it->second.hidden;
  return c;
}

BertConfig from_object(const nlohmann::json& obj, const std::string& key) {
  JsonReader r(obj, key);
  BertConfig c = r.has("preset") ? preset(r.get_string("preset", ""), r.path("preset")) : BertConfig();
  c.vocab_size = static_cast<int>(r.get_int("vocab_size", c.vocab_size, 6, 1 << 24));
  c.hidden_size = static_cast<int>(r.get_int("hidden_size", c.hidden_size, 1, 1 << 16));
  c.num_hidden_layers = static_cast<int>(r.get_int("num_hidden_layers", c.num_hidden_layers, 1, 1024));
  c.num_attention_heads = static_cast<int>(r.get_int("num_attention_heads", c.num_attention_heads, 1, 1024));
  c.intermediate_size = static_cast<int>(r.get_int("intermediate_size", c.intermediate_size, 1, 1 << 18));
  c.max_position_embeddings =
      static_cast<int>(r.get_int("max_position_embeddings", c.max_position_embeddings, 1, 1 << 16));
  c.type_vocab_size = static_cast<int>(r.get_int("type_vocab_size", c.type_vocab_size, 2, 1024));
  c.hidden_act = r.get_choice("hidden_act", c.hidden_act, {"gelu", "gelu_new", "gelu_tanh"});
  c.hidden_dropout_prob = static_cast<float>(r.get_number("hidden_dropout_prob", c.hidden_dropout_prob, 0.0, 0.99));
  c.attention_probs_dropout_prob = static_cast<float>(
      r.get_number("attention_probs_dropout_prob", c.attention_probs_dropout_prob, 0.0, 0.99));
  c.initializer_range = static_cast<float>(r.get_number("initializer_range", c.initializer_range, 0.0, 10.0));
  c.layer_norm_eps = static_cast<float>(r.get_number("layer_norm_eps", c.layer_norm_eps, 0.0, 1.0));
  if (r.has("position_embedding_type")) {
    r.get_choice("position_embedding_type", "absolute", {"absolute"});
  }
  // Metadata that Hugging Face writes into config.json and that does not change the model.
  r.ignore({"architectures", "model_type", "pad_token_id", "transformers_version", "torch_dtype",
            "use_cache", "classifier_dropout", "gradient_checkpointing", "output_past",
            // the task head's fields, read by model/task_config.cpp
            "num_labels", "id2label", "label2id", "problem_type", "finetuning_task"});
  r.finish();
  if (c.hidden_size % c.num_attention_heads != 0) {
    fail(Code::config, "config key '", key, ".hidden_size' = ", c.hidden_size,
         " is not divisible by '", key, ".num_attention_heads' = ", c.num_attention_heads);
  }
  return c;
}

}  // namespace

Activation BertConfig::activation() const {
  return hidden_act == "gelu" ? Activation::gelu_erf : Activation::gelu_tanh;
}

// Floats printed as the short decimal they were written as (0.1, not 0.10000000149011612).
namespace {
double decimal(float x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", x);
  return std::strtod(text, nullptr);
}
}  // namespace

nlohmann::json BertConfig::to_json() const {
  return {{"vocab_size", vocab_size},
          {"hidden_size", hidden_size},
          {"num_hidden_layers", num_hidden_layers},
          {"num_attention_heads", num_attention_heads},
          {"intermediate_size", intermediate_size},
          {"max_position_embeddings", max_position_embeddings},
          {"type_vocab_size", type_vocab_size},
          {"hidden_act", hidden_act},
          {"hidden_dropout_prob", decimal(hidden_dropout_prob)},
          {"attention_probs_dropout_prob", decimal(attention_probs_dropout_prob)},
          {"initializer_range", decimal(initializer_range)},
          {"layer_norm_eps", decimal(layer_norm_eps)}};
}

BertConfig parse_bert_config(const nlohmann::json& value, const std::string& key) {
  if (value.is_object()) return from_object(value, key);
  if (!value.is_string()) {
    fail(Code::config, "config key '", key, "' must be a preset name, a bert_config.json path or an object");
  }
  std::string text = value.get<std::string>();
  if (text.rfind("bert-", 0) == 0 && text.find('/') == std::string::npos &&
      text.find(".json") == std::string::npos) {
    return preset(text, key);
  }
  return from_object(read_config_file(text, "config key '" + key + "' (a bert config file)"), key + " (" + text + ")");
}

}  // namespace bert
