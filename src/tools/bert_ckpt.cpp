// bert-ckpt: look inside and convert checkpoints.
//   bert-ckpt inspect FILE [--tensors]        what a checkpoint holds (verifies its checksum); also
//                                             import sources (TF .index, safetensors, HF folder) with
//                                             their names, dtypes, shapes and mapping, and TFRecord files
//   bert-ckpt export-hf FILE DIR              Hugging Face folder (config.json + model.safetensors)
//   bert-ckpt import SOURCE OUT.h5 [--config bert_config.json] [--hidden-act ACT]
//                                             weights from an HF folder / safetensors (HF or DLE names)
//                                             or a TensorFlow 1 checkpoint (PREFIX.index + .data-*)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_interop.h"
#include "ckpt/import_source.h"
#include "ckpt/tf_bundle.h"
#include "core/error.h"
#include "prep/tfrecord.h"
#include "command_line.h"

namespace {

constexpr const char* kUsage =
    "usage: bert-ckpt inspect FILE [--tensors]\n"
    "       bert-ckpt export-hf FILE DIR\n"
    "       bert-ckpt import SOURCE OUT.h5 [--config bert_config.json] [--hidden-act gelu|gelu_tanh|...]\n"
    "SOURCE: a Hugging Face folder, a .safetensors file (HF or NVIDIA DLE names), or a TensorFlow\n"
    "checkpoint (PREFIX.index with PREFIX.data-*); FILE for inspect may also be a TFRecord file.\n";


std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s.empty() ? "scalar" : s;
}

// An HDF5 file, a checkpoint whose seal (userblock) comes before the HDF5 data, or a file named
// *.h5 (whose damaged start then gets the checkpoint reader's message).
bool is_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(21, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  return head.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0 || head == "bertengine checkpoint" ||
         std::filesystem::path(path).extension() == ".h5";
}

bool is_safetensors_source(const std::string& path) {
  const std::string suffix = ".safetensors";
  return (path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) ||
         std::filesystem::is_directory(path);
}

int inspect_checkpoint(const std::string& path, bool tensors) {
  bert::CheckpointContents c = bert::read_checkpoint(path);
  int64_t params = 0;
  for (const auto& [name, t] : c.model) params += static_cast<int64_t>(t.data.size());
  std::printf("checkpoint   %s (checksum verified)\n", path.c_str());
  std::printf("seal         %s\n", c.sealed ? "CRC-32C and length of the whole file verified before HDF5 read it"
                                            : "none (written before seals: read with its checksum attribute only)");
  std::printf("format       %d, written by bertengine %s\n", c.format_version, c.engine_version.c_str());
  std::printf("state        %s\n", c.state.dump().c_str());
  std::printf("model        %zu tensors, %lld parameters\n", c.model.size(), static_cast<long long>(params));
  std::string slots;
  for (const auto& [slot, tensors] : c.optimizer) slots += (slots.empty() ? "" : ", ") + slot;
  std::printf("optimizer    %s\n", c.has_optimizer() ? (slots + " for every tensor").c_str() : "none (weights only)");
  std::printf("config       %s\n", c.config_json.c_str());
  if (tensors) {
    for (const auto& [name, t] : c.model) {
      double sq = 0;
      for (float x : t.data) sq += static_cast<double>(x) * x;
      std::printf("  %-60s %-12s norm %.6g\n", name.c_str(), shape_text(t.shape).c_str(), std::sqrt(sq));
    }
  }
  return 0;
}

// An import source: every tensor with its dtype, stored shape and where `bert-ckpt import` puts it.
int inspect_source(const std::string& path) {
  const bert::ImportSource src = bert::read_import_source(path);
  size_t mapped = 0, slots = 0;
  for (const bert::SourceTensor& t : src.tensors) {
    if (!t.target.empty()) (t.group == "model" ? mapped : slots) += 1;
  }
  const bool tf = src.kind == "tensorflow checkpoint";
  std::printf("source       %s (%s, %s names%s)\n", src.path.c_str(), src.kind.c_str(), src.producer.c_str(),
              tf ? "; CRC-32C of every mapped tensor verified" : "");
  std::printf("config       %s\n", src.config_path.empty() ? "none beside it (import needs --config)" : src.config_path.c_str());
  std::printf("tensors      %zu: %zu model tensors, %zu optimizer slots, %zu not mapped\n", src.tensors.size(), mapped,
              slots, src.tensors.size() - mapped - slots);
  if (src.global_step >= 0) std::printf("global_step  %lld\n", static_cast<long long>(src.global_step));
  for (const bert::SourceTensor& t : src.tensors) {
    std::string to = "(not mapped)";
    if (!t.target.empty()) {
      to = "-> " + t.target + (t.group == "model" ? "" : " [" + t.group + "]") + (t.transposed ? " (transposed)" : "");
    }
    std::printf("  %-62s %-8s %-12s %s\n", t.name.c_str(), t.dtype.c_str(), shape_text(t.shape).c_str(),
                to.c_str());
  }
  return 0;
}

// A TFRecord file: record count (every CRC checked) and the features of its first Example.
int inspect_tfrecord(const std::string& path) {
  bert::TfRecordReader reader(path);
  std::string record;
  bert::Example first;
  while (reader.next(record)) {
    if (reader.records_read() == 1) first = bert::parse_example(record, "TFRecord file '" + path + "' record 0");
  }
  std::printf("tfrecord     %s: %llu records (CRC-32C verified)\n", path.c_str(),
              static_cast<unsigned long long>(reader.records_read()));
  for (const auto& [name, f] : first) std::printf("  %-30s %-6s [%zu]\n", name.c_str(), f.kind_name(), f.size());
  return 0;
}

int inspect(const std::string& path, bool tensors) {
  if (!bert::tf_checkpoint_prefix(path).empty() || is_safetensors_source(path)) return inspect_source(path);
  if (!std::filesystem::exists(path)) bert::fail(bert::Code::io, "'", path, "' does not exist");
  if (is_checkpoint(path)) return inspect_checkpoint(path, tensors);
  if (bert::is_pytorch_file(path)) return inspect_source(path);  // refused with the conversion hint
  try {
    return inspect_tfrecord(path);
  } catch (const bert::Error& e) {
    bert::fail(e.code(), "'", path, "' is not a bertengine checkpoint (HDF5), a safetensors file, a TensorFlow "
               "checkpoint or a valid TFRecord file (read as a TFRecord: ", e.what(), ")");
  }
}

int import(const bert_tools::CommandLine& args) {
  const std::string source = args.positional()[0], out = args.positional()[1];
  bert::ImportOptions options;
  options.config_path = args.text("--config");
  options.hidden_act = args.text("--hidden-act");
  bert::ImportReport r = bert::import_weights(source, options, out);
  for (const std::string& name : r.unplaced) std::printf("not placed: %s\n", name.c_str());
  for (const std::string& notice : r.notices) std::printf("notice: %s\n", notice.c_str());
  const std::string task = r.task.pretraining() ? r.task.name() : r.task.name() + " (" + std::to_string(r.task.num_labels) + " labels)";
  std::printf("imported %s (%s) to %s: task %s, %zu tensors placed (%zu transposed), %s, hidden_act %s, "
              "%zu source tensors not placed\n",
              source.c_str(), r.producer.c_str(), out.c_str(), task.c_str(), r.placed, r.transposed,
              r.optimizer_slots ? "optimizer moments included" : "weights only", r.config.hidden_act.c_str(),
              r.unplaced.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (bert_tools::asks_for_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string command = argc > 1 ? argv[1] : "";
  if (command != "inspect" && command != "export-hf" && command != "import") {
    std::fprintf(stderr, "error: unknown command '%s'\n%s", command.c_str(), kUsage);
    return 2;
  }
  bert_tools::CommandLine::Spec spec{.min_positional = 2, .max_positional = 2, .positional_name = "paths (SOURCE OUT.h5)"};
  if (command == "export-hf") spec.positional_name = "paths (FILE DIR)";
  if (command == "inspect") {
    spec = {.flags = {"--tensors"}, .min_positional = 1, .max_positional = 1, .positional_name = "FILE"};
  }
  if (command == "import") spec.with_value = {"--config", "--hidden-act"};
  const bert_tools::CommandLine args("bert-ckpt " + command, kUsage, argc, argv, 2, spec);
  try {
    if (command == "inspect") return inspect(args.positional()[0], args.flag("--tensors"));
    if (command == "import") return import(args);
    bert::export_hf_folder(args.positional()[0], args.positional()[1]);
    std::printf("exported %s to %s (config.json, model.safetensors)\n", args.positional()[0].c_str(),
                args.positional()[1].c_str());
    return 0;
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
