// TaskConfig: which head sits on the encoder — BERT pretraining (MLM + NSP) or a fine-tuning
// head with Hugging Face's names: sequence classification/regression over the pooled output
// (`classifier`), extractive question answering (`qa_outputs`: start/end logits per token), or
// token classification (`classifier` over every token). Parsed from the config's "task"
// section and from a Hugging Face config.json (`architectures`, `num_labels`, `id2label`).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bert {

enum class TaskType { pretraining, sequence_classification, question_answering, token_classification };

struct TaskConfig {
  TaskType type = TaskType::pretraining;
  int num_labels = 2;                  // sequence/token classes (1: regression); 2 for QA (start, end)
  std::vector<std::string> id2label;   // num_labels names; empty: LABEL_0, LABEL_1, ...

  bool pretraining() const { return type == TaskType::pretraining; }
  bool regression() const { return type == TaskType::sequence_classification && num_labels == 1; }
  // The model has the pooler (BertForPreTraining, BertForSequenceClassification); HF's QA and
  // token-classification models are built without it.
  bool has_pooler() const { return type == TaskType::pretraining || type == TaskType::sequence_classification; }
  // Heads whose outputs or losses cover every position, padding included (HF's QA softmax runs
  // over the whole sequence), so their batches keep the padded layout.
  bool per_token() const { return type == TaskType::question_answering || type == TaskType::token_classification; }
  std::string name() const;                // "sequence_classification", ...
  std::string hf_architecture() const;     // "BertForSequenceClassification", ...
  std::string label(int i) const;          // id2label[i] or "LABEL_i"
  nlohmann::json to_json() const;          // the config's "task" section
};

// The config's "task" value ({"type": ..., "num_labels": N, "id2label": [...]}); `key` names it
// in errors. Throws Error(config).
TaskConfig parse_task_config(const nlohmann::json& value, const std::string& key);
// The task of a Hugging Face config.json: its `architectures` (BertForPreTraining / BertForMaskedLM /
// BertModel: pretraining), `num_labels` or the size of `id2label`. `where` names the file.
TaskConfig task_from_hf_config(const nlohmann::json& config, const std::string& where);
// HF config.json fields for this task: architectures, num_labels, id2label, label2id, problem_type.
void add_hf_task_fields(const TaskConfig& task, nlohmann::json& hf_config);

}  // namespace bert
