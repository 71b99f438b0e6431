// bert-train --plan: what a recipe will do on a given number of ranks, worked out without
// allocating the model or reading data — the batch split, steps and samples, the learning-rate
// schedule, evaluation and checkpoint points, the memory per rank from the engine's own
// accounting (a session built over the cost model's address-space-only backend), and for a
// CUDA recipe the cost model's predicted step time and time to train.
#pragma once

#include <string>
#include <vector>

namespace bert_tools {

struct PlannedPhase {
  std::string path;  // the recipe file, for messages
  std::string text;  // its config text as the phase would run it
};

// Prints the plan of each phase for `world` ranks; returns the exit code (0, or 2 when a phase
// cannot run at that size, with the reason on stderr naming the file and key).
int run_plan(const std::vector<PlannedPhase>& phases, int world);

}  // namespace bert_tools
