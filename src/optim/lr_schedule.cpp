// LrSchedule::at — DLE's PolyWarmUpScheduler formula, with MLPerf's warmup start and end LR, or
// Hugging Face's linear schedule with warmup.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace bert {

double LrSchedule::at(int64_t step) const {
  if (kind == LrScheduleKind::linear) {
    const double done = static_cast<double>(step - 1), total = static_cast<double>(total_steps);
    const double warmup = std::round(warmup_proportion * total);
    if (done < warmup) return base_lr * done / std::max(1.0, warmup);
    return base_lr * std::max(0.0, (total - done) / std::max(1.0, total - warmup));
  }
  const double progress = static_cast<double>(step) / static_cast<double>(total_steps);
  const double warmup_progress = static_cast<double>(step - start_warmup_step) / static_cast<double>(total_steps);
  if (warmup_progress < warmup_proportion) return base_lr * warmup_progress / warmup_proportion;
  return (base_lr - end_lr) * std::pow(std::max(0.0, 1.0 - progress), degree) + end_lr;
}

}  // namespace bert
