// LrSchedule::at — DLE's PolyWarmUpScheduler formula.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace bert {

double LrSchedule::at(int64_t step) const {
  const double progress = static_cast<double>(step) / static_cast<double>(total_steps);
  if (progress < warmup_proportion) return base_lr * progress / warmup_proportion;
  return base_lr * std::pow(std::max(0.0, 1.0 - progress), degree);
}

}  // namespace bert
