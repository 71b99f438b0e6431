// Hugging Face / NVIDIA DLE export, and import from any source of ckpt/import_source.h (name
// mapping, config.json, task heads, vocabulary padding, GELU form, tied decoder, optimizer slots).
#include "ckpt/hf_interop.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt/import_source.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/log.h"
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
  const bool head = n.rfind("cls.", 0) == 0 || n.rfind("classifier.", 0) == 0 || n.rfind("qa_outputs.", 0) == 0;
  if (n.rfind("bert.", 0) != 0 && !head) n = "bert." + n;
  replace_all(n, ".dense_act.", ".dense.");
  if (n.find("LayerNorm.") != std::string::npos) {
    if (ends_with(n, ".gamma")) n = n.substr(0, n.size() - 6) + ".weight";
    if (ends_with(n, ".beta")) n = n.substr(0, n.size() - 5) + ".bias";
  }
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
  const TaskConfig task = engine_config.contains("task") ? parse_task_config(engine_config["task"], "task") : TaskConfig();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) fail(Code::io, "cannot create folder '", folder, "': ", ec.message());

  nlohmann::json hf = model.to_json();
  // Hugging Face names the tanh form "gelu_new" (its ACT2FN has no "gelu_tanh" for BERT configs).
  if (model.hidden_act == "gelu_tanh") hf["hidden_act"] = "gelu_new";
  add_hf_task_fields(task, hf);
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

namespace {

constexpr const char* kWordEmbeddings = "bert.embeddings.word_embeddings.weight";
constexpr const char* kDecoder = "cls.predictions.decoder.weight";

nlohmann::json read_config_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(Code::io, "cannot open config '", path, "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(Code::config, "'", path, "' is not valid JSON: ", e.what());
  }
}

// The GELU form: --hidden-act if given; for DLE sources whose config says "gelu", the tanh form
// DLE's modeling.py computes (bias_gelu); otherwise the config's, with a notice for TF sources.
void choose_activation(nlohmann::json& config, const ImportSource& src, const ImportOptions& o,
                       std::vector<std::string>& notices) {
  const std::string configured = config.value("hidden_act", "gelu");
  if (!o.hidden_act.empty()) {
    config["hidden_act"] = o.hidden_act;
    if (o.hidden_act != configured) {
      notices.push_back("hidden_act '" + o.hidden_act + "' (from --hidden-act) instead of the config's '" + configured + "'");
    }
    return;
  }
  if (configured != "gelu") return;
  if (src.producer == "NVIDIA DLE") {
    config["hidden_act"] = "gelu_tanh";
    notices.push_back("hidden_act 'gelu_tanh': NVIDIA DLE's modeling.py computes its 'gelu' in the tanh form "
                      "(bias_gelu), so these weights are recorded with it; train them with model.hidden_act "
                      "\"gelu_tanh\" (a session computing another form warns when it loads them), or import with "
                      "--hidden-act gelu for the erf form");
  } else if (src.producer == "Google BERT (TensorFlow)") {
    notices.push_back("hidden_act 'gelu' (the erf form, as the config says and Hugging Face computes it); the "
                      "modeling.py of Google's TF BERT in circulation computes 'gelu' in the tanh form: "
                      "--hidden-act gelu_tanh reproduces that");
  }
}

void keep_rows(CheckpointTensor& t, int64_t rows) {
  int64_t cols = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) cols *= t.shape[i];
  t.shape[0] = rows;
  t.data.resize(static_cast<size_t>(rows * cols));
}

// A source vocabulary padded to the next multiple of 8 (DLE's 30528 for 30522) loses its padding
// rows in every vocabulary-sized tensor, so the model's vocabulary is the config's.
void remove_vocab_padding(std::map<std::string, TensorMap>& groups, const BertConfig& config,
                          std::vector<std::string>& notices) {
  auto word = groups["model"].find(kWordEmbeddings);
  if (word == groups["model"].end() || word->second.shape.empty()) return;
  const int64_t rows = word->second.shape[0], vocab = config.vocab_size;
  if (rows <= vocab || rows != config.padded_vocab_size()) return;
  for (auto& [group, tensors] : groups) {
    for (const char* name : {kWordEmbeddings, kDecoder, "cls.predictions.bias"}) {
      auto it = tensors.find(name);
      if (it != tensors.end() && !it->second.shape.empty() && it->second.shape[0] == rows) keep_rows(it->second, vocab);
    }
  }
  notices.push_back("removed " + std::to_string(rows - vocab) + " vocabulary padding rows: the source has " +
                    std::to_string(rows) + " word-embedding rows, the config's vocab_size is " + std::to_string(vocab) +
                    " (the engine pads internally and keeps padding out of the softmax)");
}

// A decoder equal to the word embeddings is a tied copy and dropped; an untied one is refused,
// since the engine's MLM decoder is the word-embedding matrix.
void check_tied_decoder(TensorMap& model, const std::string& path, std::vector<std::string>& notices) {
  auto dec = model.find(kDecoder);
  if (dec == model.end()) return;
  auto word = model.find(kWordEmbeddings);
  if (word != model.end() && word->second.shape == dec->second.shape) {
    double worst = 0;
    for (size_t i = 0; i < dec->second.data.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(dec->second.data[i] - word->second.data[i])));
    }
    if (worst == 0) {
      model.erase(dec);
      notices.push_back(std::string(kDecoder) + " is tied to (equal to) the word embeddings: kept once");
      return;
    }
    fail(Code::unsupported, "'", path, "' has an untied MLM decoder: '", kDecoder, "' differs from '", kWordEmbeddings,
         "' (max |difference| ", worst, "). This engine ties the decoder to the word embeddings, as BERT does; "
         "importing it would change the model's predictions. Tie them in the source model before exporting");
  }
  fail(Code::unsupported, "'", path, "' has an MLM decoder '", kDecoder, "' but no word embeddings of the same shape "
       "to tie it to; this engine ties the decoder to the word embeddings");
}

}  // namespace

ImportReport import_weights(const std::string& source, const ImportOptions& options, const std::string& output) {
  ImportSource src = read_import_source(source);
  const std::string cfg = options.config_path.empty() ? src.config_path : options.config_path;
  if (cfg.empty()) fail(Code::invalid_argument, "importing '", source, "' needs its bert_config.json (--config)");
  ImportReport report;
  report.producer = src.producer;
  nlohmann::json config_json = read_config_json(cfg);
  choose_activation(config_json, src, options, report.notices);
  report.config = parse_bert_config(config_json, "model (" + cfg + ")");
  report.task = task_from_hf_config(config_json, cfg);

  ParamTable table(report.config, report.task);
  std::map<std::string, TensorMap> groups;  // "model", "exp_avg", "exp_avg_sq" -> engine name -> tensor
  for (SourceTensor& t : src.tensors) {
    const bool known = t.target == kDecoder || table.find(t.target) >= 0;
    if (t.target.empty() || !known) {
      report.unplaced.push_back(t.name);
      continue;
    }
    TensorMap& group = groups[t.group];
    if (group.count(t.target)) continue;  // a second spelling of the same tensor
    if (t.group == "model" && t.transposed) ++report.transposed;
    group[t.target] = std::move(t.value);
  }
  remove_vocab_padding(groups, report.config, report.notices);
  for (auto& [group, tensors] : groups) check_tied_decoder(tensors, src.path, report.notices);
  report.placed = groups["model"].size();
  if (report.placed == 0) {
    fail(Code::checkpoint, "'", src.path, "' (", src.kind, ") holds no tensor under a BERT name this importer knows "
         "(Hugging Face, DLE or Google BERT TF names); `bert-ckpt inspect` lists its names");
  }

  CheckpointContents c;
  c.config_json = nlohmann::json({{"model", report.config.to_json()}, {"task", report.task.to_json()}}).dump();
  c.state = {{"imported_from", source}};
  if (src.global_step >= 0) c.state["source_global_step"] = src.global_step;
  const size_t slots = groups["exp_avg"].size() + groups["exp_avg_sq"].size();
  report.optimizer_slots = slots == 2 * table.entries.size();
  if (slots > 0 && !report.optimizer_slots) {
    report.notices.push_back("optimizer slots found for only " + std::to_string(slots) + " of " +
                             std::to_string(2 * table.entries.size()) + " moments: not imported");
  }
  {  // each group is verified and copied, then its source tensors are freed (a BERT-large with slots is 4 GB)
    std::vector<float> flat(table.total_elems, 0.0f);
    auto place = [&](const std::string& group, const std::string& what, TensorMap& into) {
      load_tensors(table, groups[group], src.path, what, flat.data());
      groups[group].clear();
      into = tensors_of(table, flat.data());
    };
    place("model", "model", c.model);
    if (report.optimizer_slots) {
      for (const char* slot : {"exp_avg", "exp_avg_sq"}) place(slot, std::string("optimizer ") + slot, c.optimizer[slot]);
    }
  }
  write_checkpoint(output, c);
  return report;
}

void adapt_to_task(const ParamTable& table, const float* flat, const std::string& path, TensorMap& tensors) {
  std::vector<std::string> dropped;
  for (auto it = tensors.begin(); it != tensors.end();) {
    const std::string& name = it->first;
    const bool foreign_head = name.rfind("cls.", 0) == 0 || name.rfind("classifier.", 0) == 0 ||
                              name.rfind("qa_outputs.", 0) == 0 || name.rfind("bert.pooler.", 0) == 0;
    if (table.find(name) < 0 && foreign_head) {
      dropped.push_back(name);
      it = tensors.erase(it);
    } else {
      ++it;
    }
  }
  bool has_head = false;
  for (size_t i = table.first_head_entry; i < table.entries.size(); ++i) has_head = has_head || tensors.count(table.entries[i].name);
  std::string initialised;
  if (!has_head) {
    const TensorMap mine = tensors_of(table, flat);
    for (size_t i = table.first_head_entry; i < table.entries.size(); ++i) {
      const std::string& name = table.entries[i].name;
      tensors[name] = mine.at(name);
      initialised += (initialised.empty() ? "" : ", ") + name;
    }
  }
  std::string note = "fine-tuning from '" + path + "'";
  if (!dropped.empty()) note += ": " + std::to_string(dropped.size()) + " tensors of other heads not used";
  if (!initialised.empty()) note += "; initialised " + initialised;
  log_message(log_info, note);
}

}  // namespace bert
