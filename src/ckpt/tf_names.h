// Google BERT's TensorFlow variable names (modeling.py, run_pretraining.py) mapped onto the
// engine's Hugging Face names: "bert/encoder/layer_3/attention/self/query/kernel" is
// "bert.encoder.layer.3.attention.self.query.weight" transposed (TF kernels are [in, out]),
// LayerNorm gamma/beta are weight/bias, "cls/predictions/output_bias" is "cls.predictions.bias",
// "cls/seq_relationship/output_weights" is already [out, in]. The optimizer's slots
// "<var>/adam_m" and "<var>/adam_v" (AdamWeightDecay, LAMB) are Adam's exp_avg and exp_avg_sq.
#pragma once

#include <string>

namespace bert {

struct TfNameMapping {
  std::string target;      // Hugging Face name
  std::string group;       // "model", "exp_avg" or "exp_avg_sq"
  bool transpose = false;  // a [in, out] kernel
};

// False for names that are not BERT variables or slots (global_step, loss-scale state, ...).
bool map_tf_bert_name(const std::string& tf_name, TfNameMapping& out);

// The TensorFlow variable name of a Hugging Face BERT name (the inverse of map_tf_bert_name for
// the model's tensors): what MLPerf's BERT logs name in weights_initialization.
std::string tf_bert_name(const std::string& hf_name);

}  // namespace bert
