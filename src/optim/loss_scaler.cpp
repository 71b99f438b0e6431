// LossScaler: the dynamic/static loss-scale state machine (see loss_scaler.h).
#include "optim/loss_scaler.h"

#include <algorithm>

namespace bert {

LossScaler::LossScaler(const LossScaleConfig& config) : config_(config) {
  scale_ = config_.mode == "none" ? 1.0 : config_.initial;
}

void LossScaler::update(bool overflow) {
  if (config_.mode != "dynamic") return;
  if (overflow) {
    scale_ = std::max(config_.min, scale_ / 2);
    clean_steps_ = 0;
    return;
  }
  if (++clean_steps_ >= config_.window) {
    scale_ = std::min(config_.max, scale_ * 2);
    clean_steps_ = 0;
  }
}

void LossScaler::restore(double scale, int64_t clean_steps) {
  if (config_.mode == "none") return;
  scale_ = scale;
  clean_steps_ = clean_steps;
}

}  // namespace bert
