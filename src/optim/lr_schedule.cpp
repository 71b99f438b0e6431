// LrSchedule::at — DLE's PolyWarmUpScheduler formula, with MLPerf's warmup start and end LR.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace bert {

double LrSchedule::at(int64_t step) const {
  const double progress = static_cast<double>(step) / static_cast<double>(total_steps);
  const double warmup_progress = static_cast<double>(step - start_warmup_step) / static_cast<double>(total_steps);
  if (warmup_progress < warmup_proportion) return base_lr * warmup_progress / warmup_proportion;
  return (base_lr - end_lr) * std::pow(std::max(0.0, 1.0 - progress), degree) + end_lr;
}

}  // namespace bert
