// Learning-rate schedule of NVIDIA DLE BERT (PolyWarmUpScheduler): linear warmup, then
// polynomial decay to zero at total_steps (degree 0.5 in DLE, 1.0 in MLPerf); with MLPerf's
// generalisations (its reference convergence points use them): a warmup that starts at
// start_warmup_step (negative: the run starts part-way up the ramp) and a decay to end_lr.
#pragma once

#include <cstdint>

namespace bert {

// Kind "linear" is Hugging Face's get_linear_schedule_with_warmup instead (the fine-tuning
// default of HF's Trainer): optimizer step s runs at HF's factor for s - 1 (its scheduler steps
// after the optimizer), base·(s-1)/W during W = round(warmup_proportion·total_steps) warmup
// steps, then base·(total-(s-1))/(total-W). So with warmup the first step runs at 0, and the last
// at base/(total-W) where DLE's poly schedule runs its last step at 0. It ignores the degree and
// takes no start_warmup_step or end_lr.
enum class LrScheduleKind { poly, linear };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::poly;
  double base_lr = 1e-3;
  int64_t total_steps = 1;
  double warmup_proportion = 0.01;  // of total_steps
  double degree = 0.5;
  int64_t start_warmup_step = 0;
  double end_lr = 0;
  // Rate for optimizer step `step` (1-based): progress p = step / total_steps, warmup progress
  // w = (step - start_warmup_step) / total_steps; w < warmup ? base·w/warmup :
  // (base - end)·(1 - p)^degree + end (end past the end). DLE's formula when start and end are 0.
  double at(int64_t step) const;
};

}  // namespace bert
