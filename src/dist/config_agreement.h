// Config agreement across ranks: at session creation every rank's resolved config is gathered
// and compared with rank 0's, so a run where ranks disagree (different model, batch size,
// optimizer...) fails at once with the keys and values at fault instead of diverging silently.
#pragma once

#include <nlohmann/json.hpp>

#include "dist/communicator.h"

namespace bert {

// COLLECTIVE. Throws Error(config) on every rank when any rank's config differs from rank 0's
// in a key that must agree (all but per-rank keys: train.threads, data directories, device).
void check_same_config(Communicator& comm, const nlohmann::json& resolved_config);

// COLLECTIVE. The world's seed: rank 0's train.seed. Weights, dropout streams, synthetic data
// and the shard shuffle (which assumes one seed: ranks take disjoint files of one shuffled list)
// all derive from it, as a resumed run's do from the checkpoint's. A rank whose own seed
// differs logs a warning saying so.
uint64_t world_seed(Communicator& comm, uint64_t own_seed);

}  // namespace bert
