// Checkpoint files: one HDF5 file, /model/<Hugging Face name> fp32 datasets plus attributes
// (format version, engine version, step, config JSON). Writes go to a temporary name in the
// same directory, are fsynced and renamed, so a checkpoint is either whole or absent.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/param_table.h"

namespace bert {

constexpr int kCheckpointFormatVersion = 1;

struct CheckpointTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct CheckpointContents {
  int format_version = kCheckpointFormatVersion;
  int64_t step = 0;
  std::string config_json;
  std::map<std::string, CheckpointTensor> model;  // HF name -> tensor
};

// Writes atomically (temporary file + fsync + rename + directory fsync). Throws Error(io).
void write_checkpoint(const std::string& path, const CheckpointContents& contents);
// Reads the whole file. Throws Error(io) if unreadable, Error(checkpoint) if malformed.
CheckpointContents read_checkpoint(const std::string& path);
// Checks that `path` can be created (its directory exists and is writable). Throws Error(io).
void check_writable(const std::string& path);

// Model tensors <-> checkpoint: host copies of the parameters in HF shapes, and the reverse
// with every name and shape verified before anything is written to `flat` (all-or-nothing).
std::map<std::string, CheckpointTensor> model_tensors(const ParamTable& table, const float* flat_host);
void load_model_tensors(const ParamTable& table, const std::map<std::string, CheckpointTensor>& tensors,
                        const std::string& path, float* flat_host);

}  // namespace bert
