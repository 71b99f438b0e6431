// Learning-rate schedule of NVIDIA DLE BERT (PolyWarmUpScheduler): linear warmup, then
// polynomial decay to zero at total_steps (degree 0.5 in DLE, 1.0 in MLPerf).
#pragma once

#include <cstdint>

namespace bert {

struct LrSchedule {
  double base_lr = 1e-3;
  int64_t total_steps = 1;
  double warmup_proportion = 0.01;  // of total_steps
  double degree = 0.5;
  // Rate for optimizer step `step` (1-based): progress p = step / total_steps;
  // p < warmup ? base·p/warmup : base·(1 - p)^degree (0 past the end).
  double at(int64_t step) const;
};

}  // namespace bert
