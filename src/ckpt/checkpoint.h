// Checkpoint files: one HDF5 file holding the whole training state — fp32 master weights under
// /model/<Hugging Face name>, Adam moments under /optimizer/exp_avg|exp_avg_sq/<name>, and a
// JSON "state" attribute (global step, phase, optimizer steps, dropout stream, loss scale, every
// rank's data cursor), the config, format and engine versions, and a checksum over all of it
// (every attribute and tensor) that reading verifies. In front of the HDF5 data, a seal (an HDF5
// userblock, checkpoint_seal.h) holds the CRC-32C and length of the whole file, checked before
// HDF5 parses it. Writes go to a temporary name in the same directory, are fsynced
// and renamed (and the directory fsynced), so a checkpoint is either whole or absent.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "model/param_table.h"

namespace bert {

constexpr int kCheckpointFormatVersion = 2;
// Format 1 (still read): the same layout, its checksum covering the tensors only.
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
  nlohmann::json state = nlohmann::json::object();  // training position (see session.cpp)
  TensorMap model;
  TensorMap exp_avg, exp_avg_sq;  // empty in a weights-only file
  bool sealed = false;            // read: it had a seal (files written before seals have none)
  bool has_optimizer() const { return !exp_avg.empty(); }
};

// Writes atomically. Throws Error(io) and removes the temporary file on any failure.
void write_checkpoint(const std::string& path, const CheckpointContents& contents);
// Reads and verifies the whole file (seal, format version, checksum). Throws Error(io) if the file
// is missing or unreadable, Error(checkpoint) if it is malformed, truncated or corrupt.
CheckpointContents read_checkpoint(const std::string& path);
// For telling apart the checkpoints of a directory cheaply: run_id, written_ns and global_step
// (where recorded) from the seal, its header checked but not the whole file; for a file without
// a seal, its "state" attribute, parsed but not verified. Throws Error(checkpoint/io) like
// read_checkpoint.
nlohmann::json read_checkpoint_summary(const std::string& path);
// Checks that files can be created in `dir` (exists, is a directory, is writable). Error(io).
void check_writable_dir(const std::string& dir);

// Host copies of tensors of a flat buffer in HF shapes (word embeddings: vocab_size rows).
TensorMap tensors_of(const ParamTable& table, const float* flat_host);
// The reverse: every name and shape is verified before anything is written to `flat_host`
// (all-or-nothing); `what` names the group in messages ("model", "optimizer exp_avg").
void load_tensors(const ParamTable& table, const TensorMap& tensors, const std::string& path,
                  const std::string& what, float* flat_host);

}  // namespace bert
