// bert-ckpt: look inside and convert checkpoints.
//   bert-ckpt inspect FILE [--tensors]        what a checkpoint holds (verifies its checksum)
//   bert-ckpt export-hf FILE DIR              Hugging Face folder (config.json + model.safetensors)
//   bert-ckpt import SOURCE OUT.h5 [--config bert_config.json]
//                                             weights from an HF folder / safetensors (HF or DLE names)
#include <cmath>
#include <cstdio>
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_interop.h"
#include "core/error.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: bert-ckpt inspect FILE [--tensors]\n"
               "       bert-ckpt export-hf FILE DIR\n"
               "       bert-ckpt import SOURCE OUT.h5 [--config bert_config.json]\n");
  return 2;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

int inspect(const std::string& path, bool tensors) {
  bert::CheckpointContents c = bert::read_checkpoint(path);
  int64_t params = 0;
  for (const auto& [name, t] : c.model) params += static_cast<int64_t>(t.data.size());
  std::printf("checkpoint   %s (checksum verified)\n", path.c_str());
  std::printf("format       %d, written by bertengine %s\n", c.format_version, c.engine_version.c_str());
  std::printf("state        %s\n", c.state.dump().c_str());
  std::printf("model        %zu tensors, %lld parameters\n", c.model.size(), static_cast<long long>(params));
  std::printf("optimizer    %s\n", c.has_optimizer() ? "Adam moments (exp_avg, exp_avg_sq) for every tensor" : "none (weights only)");
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string command = argv[1];
  try {
    if (command == "inspect") {
      return inspect(argv[2], argc > 3 && std::string(argv[3]) == "--tensors");
    }
    if (command == "export-hf" && argc == 4) {
      bert::export_hf_folder(argv[2], argv[3]);
      std::printf("exported %s to %s (config.json, model.safetensors)\n", argv[2], argv[3]);
      return 0;
    }
    if (command == "import" && (argc == 4 || argc == 6)) {
      std::string config;
      if (argc == 6) {
        if (std::string(argv[4]) != "--config") return usage();
        config = argv[5];
      }
      bert::ImportReport r = bert::import_weights(argv[2], config, argv[3]);
      for (const std::string& name : r.unplaced) std::printf("not placed: %s\n", name.c_str());
      std::printf("imported %s to %s (%zu source tensors not placed)\n", argv[2], argv[3], r.unplaced.size());
      return 0;
    }
  } catch (const bert::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return usage();
}
