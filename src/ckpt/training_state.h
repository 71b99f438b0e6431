// TrainingState: where a run stands, as a checkpoint records it beside its tensors
// (/metadata/state, a JSON object): the step counters, the random streams' seed and position, the
// loss scale, and every rank's data cursor. The session gathers it when it saves and scatters it
// when it resumes; this file alone knows its keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_dir.h"

namespace bert {

struct TrainingState {
  int64_t global_step = 0;
  int phase = 1;
  int64_t optimizer_steps = 0;  // Adam's bias correction counts these (skipped steps do not count)
  uint64_t micro_step = 0;      // the dropout stream's position
  uint64_t seed = 0;            // the run's seed, from which every random stream is derived
  double loss_scale = 1;
  int64_t loss_scale_clean_steps = 0;
  int world_size = 1;
  std::string run_id = kLegacyRunId;  // files written before run ids have none
  int64_t written_ns = -1;            // wall clock at writing (ns since the epoch); -1: not recorded
  std::vector<std::string> data_cursors;  // each rank's data position, as JSON text ("null": host batches)

  nlohmann::json to_json() const;
  // Reads and validates a state written by to_json (older files may lack the loss scale, the run
  // id and the time). Error(checkpoint) naming `path` and the key that is missing or invalid.
  static TrainingState from_json(const nlohmann::json& state, const std::string& path);
};

}  // namespace bert
