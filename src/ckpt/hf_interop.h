// Hugging Face interop: export a checkpoint to a model folder (config.json with the task's
// architecture — BertForPreTraining, BertForSequenceClassification, BertForQuestionAnswering,
// BertForTokenClassification — num_labels and id2label, + model.safetensors under HF names and
// the original vocabulary size), and import weights from HF folders, safetensors files, NVIDIA DLE
// state dicts (names `dense_act`, LayerNorm `gamma`/`beta`, a `module.` prefix) converted to
// safetensors by src/tools/torch_to_safetensors.py, or TensorFlow 1 checkpoints of Google BERT
// (ckpt/import_source.h reads them all).
#pragma once

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/bert_config.h"
#include "model/task_config.h"

namespace bert {

void export_hf_folder(const std::string& checkpoint_path, const std::string& folder);

struct ImportOptions {
  std::string config_path;  // bert_config.json; "" = the one beside the source (HF folder, TF checkpoint)
  std::string hidden_act;   // overrides the config's; "" = the form the source's producer computes
};

struct ImportReport {
  BertConfig config;
  TaskConfig task;                     // from config.json's architectures / num_labels / id2label
  std::string producer;                // "Hugging Face", "NVIDIA DLE", "Google BERT (TensorFlow)"
  std::vector<std::string> unplaced;   // source tensors that map to no model parameter
  std::vector<std::string> notices;    // what the import changed or assumed (vocab padding, GELU form, ...)
  size_t placed = 0, transposed = 0;   // model tensors placed, of which stored transposed
  bool optimizer_slots = false;        // Adam/LAMB moments imported as exp_avg / exp_avg_sq
};

// Reads `source` (an HF folder, a .safetensors file, or a TF checkpoint PREFIX[.index]), maps
// names, removes vocabulary padding rows beyond the config's vocab_size (DLE pads to a multiple
// of 8), drops a decoder tied to the word embeddings and refuses an untied one, verifies every
// parameter is present with the right shape (error naming the tensor otherwise), and writes a
// checkpoint to `output`: the weights, plus the optimizer moments when the source has them for
// every parameter. Source tensors that place nowhere are reported, not fatal.
ImportReport import_weights(const std::string& source, const ImportOptions& options, const std::string& output);

// Fine-tuning from another model's weights (`tensors`, read from `path`): heads this task does not
// have (pretraining's cls.*, another task's classifier, a pooler HF's QA/token models lack) are
// dropped, and a file without this task's head keeps the head initialised in `flat` (normal(0,
// initializer_range), zero bias), as Hugging Face's from_pretrained does; one log line says what
// changed. The encoder must be complete (the caller's load checks it).
void adapt_to_task(const ParamTable& table, const float* flat, const std::string& path, TensorMap& tensors);

// The engine's name for a source tensor name (HF or DLE spelling); the MLM decoder keeps its
// name "cls.predictions.decoder.weight" (the import checks that it is tied).
std::string canonical_param_name(const std::string& source_name);

}  // namespace bert
