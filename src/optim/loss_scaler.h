// Loss scaling for fp16 training (apex/DLE dynamic scaler semantics). The loss gradient is
// multiplied by scale() before backward and the optimizer divides it out again. A step whose
// gradients overflowed (non-finite norm) is skipped and, when dynamic, halves the scale; after
// `window` clean steps in a row the scale doubles. The scale stays within [min, max].
#pragma once

#include <cstdint>
#include <string>

namespace bert {

struct LossScaleConfig {
  std::string mode = "none";  // "none", "static" or "dynamic"
  double initial = 1048576.0;  // 2^20
  int64_t window = 2000;       // clean steps before the scale doubles
  double min = 1.0, max = 16777216.0;  // 2^24
};

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& config);

  // The factor the loss gradient is multiplied by (1 in mode "none").
  double scale() const { return scale_; }
  // Records the outcome of one optimizer step (overflow: its gradient was not finite).
  void update(bool overflow);

  // Checkpointed state.
  int64_t clean_steps() const { return clean_steps_; }
  void restore(double scale, int64_t clean_steps);

 private:
  LossScaleConfig config_;
  double scale_ = 1.0;
  int64_t clean_steps_ = 0;
};

}  // namespace bert
