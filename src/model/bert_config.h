// BertConfig: the Hugging Face bert_config.json fields, named presets, and validation.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "backend/ops.h"

namespace bert {

struct BertConfig {
  int vocab_size = 30522;
  int hidden_size = 768;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int intermediate_size = 3072;
  int max_position_embeddings = 512;
  int type_vocab_size = 2;
  std::string hidden_act = "gelu";
  float hidden_dropout_prob = 0.1f;
  float attention_probs_dropout_prob = 0.1f;
  float initializer_range = 0.02f;
  float layer_norm_eps = 1e-12f;

  int head_dim() const { return hidden_size / num_attention_heads; }
  // The word-embedding/decoder rows are padded to a multiple of 8 internally.
  int padded_vocab_size() const { return (vocab_size + 7) / 8 * 8; }
  Activation activation() const;
  // HF-style bert_config.json object.
  nlohmann::json to_json() const;
};

// Parses the config's "model" value: a preset name ("bert-tiny" ... "bert-large"), a path to a
// bert_config.json, or an object of bert_config.json fields (optionally with "preset" to start
// from). Throws Error(config) naming the key at fault; `key` is the dotted path ("model").
BertConfig parse_bert_config(const nlohmann::json& value, const std::string& key);

}  // namespace bert
