// Checkpoint files: one HDF5 file holding the whole training state — fp32 master weights under
// /model/<Hugging Face name>, the optimizer's state under /optimizer/<slot>/<name> (one group per
// slot the optimizer declares: Adam's exp_avg and exp_avg_sq, SGD's momentum_buffer), and
// metadata: /metadata/state (JSON, ckpt/training_state.h: global step, phase, optimizer steps,
// dropout stream, loss scale, every rank's data cursor), /metadata/config (the session config), /metadata/index (every
// tensor's name and shape), each a scalar fixed-length string dataset (datasets, not attributes:
// HDF5 refuses attributes above 64 KB, and BERT-large's index alone is 69 KB), plus small
// attributes format_version, engine_version and checksum (CRC-32C over the metadata and every
// tensor, which reading verifies). In front of the HDF5 data, a seal (an HDF5 userblock,
// checkpoint_seal.h) holds the CRC-32C and length of the whole file, checked before HDF5 parses
// it. Tensors are written straight from where they live (no copy of the state in memory) to a
// temporary name in the same directory, fsynced and renamed (and the directory fsynced), so a
// checkpoint is either whole or absent. Formats 1 and 2 (metadata in attributes, an FNV-1a 64
// checksum) are still read.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "model/param_table.h"

namespace bert {

constexpr int kCheckpointFormatVersion = 3;
// Still read: format 2 (config, state and index as string attributes of the root group, the
// checksum an FNV-1a 64 over the same bytes) and format 1 (as 2, its checksum over tensors only).
constexpr int kAttributeMetadataFormatVersion = 2;
constexpr int kTensorChecksumFormatVersion = 1;

struct CheckpointTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

using TensorMap = std::map<std::string, CheckpointTensor>;  // HF name -> tensor

struct CheckpointContents {
  int format_version = kCheckpointFormatVersion;
  std::string engine_version;
  std::string config_json;
  nlohmann::json state = nlohmann::json::object();  // training position (TrainingState)
  TensorMap model;
  std::map<std::string, TensorMap> optimizer;  // slot -> tensors; empty in a weights-only file
  bool sealed = false;  // read: it had a seal (files written before seals have none)
  bool has_optimizer() const { return !optimizer.empty(); }
};

// Tensors to write, borrowed from wherever they live (a session's host buffers, a TensorMap).
struct TensorView {
  std::vector<int64_t> shape;
  const float* values = nullptr;
};
using TensorViews = std::map<std::string, TensorView>;  // HF name -> tensor

struct CheckpointSource {
  std::string config_json;
  nlohmann::json state = nlohmann::json::object();
  TensorViews model;
  std::map<std::string, TensorViews> optimizer;  // slot -> tensors; empty: a weights-only file
};

// Writes atomically, streaming each tensor from its views. Throws Error(io) and removes the
// temporary file on any failure.
void write_checkpoint(const std::string& path, const CheckpointSource& source);
// The same, for tensors held in a CheckpointContents.
void write_checkpoint(const std::string& path, const CheckpointContents& contents);
// Reads and verifies the whole file (seal, format version, checksum). Throws Error(io) if the file
// is missing or unreadable, Error(checkpoint) if it is malformed, truncated or corrupt.
CheckpointContents read_checkpoint(const std::string& path);
// Flat host buffers laid out as `table` says (parameter-sized each), to read a checkpoint into.
struct FlatTensors {
  const ParamTable* table = nullptr;
  float* model = nullptr;
  std::map<std::string, float*> optimizer;  // slot -> buffer
};
// read_checkpoint's checks, with every tensor read straight into `into` (no second copy of the
// state): each group must hold exactly the table's names and shapes (Error(checkpoint) naming the
// first that does not), and the file's optimizer slots must be exactly `into`'s (a file without
// optimizer state, or with another optimizer's, is refused naming both). The returned contents'
// tensor maps stay empty. On error `into` holds partial data.
CheckpointContents read_checkpoint_into(const std::string& path, const FlatTensors& into);
// For telling apart the checkpoints of a directory cheaply: run_id, written_ns and global_step
// (where recorded) from the seal, its header checked but not the whole file; for a file without
// a seal, its "state" attribute, parsed but not verified. Throws Error(checkpoint/io) like
// read_checkpoint.
nlohmann::json read_checkpoint_summary(const std::string& path);
// The session config a checkpoint was written with, from its metadata alone (the seal's header
// checked, not the whole file: a session that loads the file verifies all of it).
nlohmann::json read_checkpoint_config(const std::string& path);
// Checks that files can be created in `dir` (exists, is a directory, is writable). Error(io).
void check_writable_dir(const std::string& dir);

// Host copies of tensors of a flat buffer in HF shapes (word embeddings: vocab_size rows).
TensorMap tensors_of(const ParamTable& table, const float* flat_host);
// Views of the same tensors, borrowing `flat_host` (no copy).
TensorViews tensor_views(const ParamTable& table, const float* flat_host);
TensorViews tensor_views(const TensorMap& tensors);
// The reverse: every name and shape is verified before anything is written to `flat_host`
// (all-or-nothing); `what` names the group in messages ("model", "optimizer exp_avg").
void load_tensors(const ParamTable& table, const TensorMap& tensors, const std::string& path,
                  const std::string& what, float* flat_host);

}  // namespace bert
