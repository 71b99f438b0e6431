// Task heads' configuration: the "task" section of the session config and the task fields of
// Hugging Face config.json files (architectures, num_labels, id2label, problem_type).
#include "model/task_config.h"

#include "core/error.h"
#include "core/json_reader.h"

namespace bert {
namespace {

struct TaskName {
  TaskType type;
  const char* name;
  const char* architecture;
};

constexpr TaskName kTasks[] = {
    {TaskType::pretraining, "pretraining", "BertForPreTraining"},
    {TaskType::sequence_classification, "sequence_classification", "BertForSequenceClassification"},
    {TaskType::question_answering, "question_answering", "BertForQuestionAnswering"},
    {TaskType::token_classification, "token_classification", "BertForTokenClassification"},
};

const TaskName& entry(TaskType t) {
  for (const TaskName& n : kTasks) {
    if (n.type == t) return n;
  }
  return kTasks[0];
}

// id2label as HF writes it ({"0": "neg", "1": "pos"}) or as a list.
std::vector<std::string> read_id2label(const nlohmann::json& v, int num_labels, const std::string& key) {
  std::vector<std::string> names(num_labels);
  if (v.is_array()) {
    if (static_cast<int>(v.size()) != num_labels) {
      fail(Code::config, "config key '", key, "' has ", v.size(), " names but num_labels is ", num_labels);
    }
    for (int i = 0; i < num_labels; ++i) {
      if (!v[i].is_string()) fail(Code::config, "config key '", key, "[", i, "]' must be a string");
      names[i] = v[i].get<std::string>();
    }
    return names;
  }
  if (!v.is_object()) fail(Code::config, "config key '", key, "' must be a list or an object of label names");
  if (static_cast<int>(v.size()) != num_labels) {
    fail(Code::config, "config key '", key, "' has ", v.size(), " entries but num_labels is ", num_labels);
  }
  for (const auto& [id, name] : v.items()) {
    int i = -1;
    try {
      size_t used = 0;
      i = std::stoi(id, &used);
      if (used != id.size()) i = -1;
    } catch (const std::exception&) {
      i = -1;
    }
    if (i < 0 || i >= num_labels || !name.is_string()) {
      fail(Code::config, "config key '", key, "' entry \"", id, "\" must map a label id in [0, ", num_labels,
           ") to a name");
    }
    names[i] = name.get<std::string>();
  }
  return names;
}

}  // namespace

std::string TaskConfig::name() const { return entry(type).name; }
std::string TaskConfig::hf_architecture() const { return entry(type).architecture; }

std::string TaskConfig::label(int i) const {
  return i < static_cast<int>(id2label.size()) ? id2label[i] : "LABEL_" + std::to_string(i);
}

nlohmann::json TaskConfig::to_json() const {
  nlohmann::json j = {{"type", name()}};
  if (!pretraining()) j["num_labels"] = num_labels;
  if (!id2label.empty()) j["id2label"] = id2label;
  return j;
}

TaskConfig parse_task_config(const nlohmann::json& value, const std::string& key) {
  if (!value.is_object()) fail(Code::config, "config key '", key, "' must be an object with a \"type\"");
  JsonReader r(value, key);
  TaskConfig t;
  const std::string type = r.get_choice("type", "pretraining",
                                        {"pretraining", "sequence_classification", "question_answering",
                                         "token_classification"});
  for (const TaskName& n : kTasks) {
    if (type == n.name) t.type = n.type;
  }
  if (t.type == TaskType::question_answering) {
    t.num_labels = static_cast<int>(r.get_int("num_labels", 2, 2, 2));
  } else if (!t.pretraining()) {
    const int min = t.type == TaskType::sequence_classification ? 1 : 2;
    t.num_labels = static_cast<int>(r.get_int("num_labels", 2, min, 1 << 16));
  }
  if (r.has("id2label")) t.id2label = read_id2label(r.raw("id2label"), t.num_labels, r.path("id2label"));
  r.finish();
  return t;
}

TaskConfig task_from_hf_config(const nlohmann::json& config, const std::string& where) {
  TaskConfig t;
  std::string arch = "BertForPreTraining";
  if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty() &&
      config["architectures"][0].is_string()) {
    arch = config["architectures"][0].get<std::string>();
  }
  bool known = false;
  for (const TaskName& n : kTasks) {
    if (arch == n.architecture) t.type = n.type, known = true;
  }
  if (arch == "BertForMaskedLM" || arch == "BertModel" || arch == "BertLMHeadModel") known = true;
  if (!known) {
    fail(Code::unsupported, where, ": architecture '", arch, "' is not one this engine builds (BertForPreTraining, "
         "BertForSequenceClassification, BertForQuestionAnswering, BertForTokenClassification)");
  }
  if (t.pretraining()) return t;
  int labels = 2;
  if (config.contains("id2label") && config["id2label"].is_object()) labels = static_cast<int>(config["id2label"].size());
  if (config.contains("num_labels") && config["num_labels"].is_number_integer()) labels = config["num_labels"].get<int>();
  nlohmann::json section = {{"type", t.name()}, {"num_labels", labels}};
  if (config.contains("id2label")) section["id2label"] = config["id2label"];
  t = parse_task_config(section, where);
  bool generic = true;  // HF's default names (LABEL_0...) are not kept
  for (int i = 0; i < static_cast<int>(t.id2label.size()); ++i) generic = generic && t.id2label[i] == "LABEL_" + std::to_string(i);
  if (generic) t.id2label.clear();
  return t;
}

void add_hf_task_fields(const TaskConfig& task, nlohmann::json& hf) {
  hf["architectures"] = {task.hf_architecture()};
  if (task.pretraining()) return;
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int i = 0; i < task.num_labels; ++i) {
    id2label[std::to_string(i)] = task.label(i);
    label2id[task.label(i)] = i;
  }
  hf["num_labels"] = task.num_labels;
  hf["id2label"] = id2label;
  hf["label2id"] = label2id;
  if (task.type == TaskType::sequence_classification) {
    hf["problem_type"] = task.regression() ? "regression" : "single_label_classification";
  }
}

}  // namespace bert
