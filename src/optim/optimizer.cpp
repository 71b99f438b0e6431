// Optimizer::step — global-norm clip, Adam moments with bias correction, decoupled weight
// decay, and LAMB's per-tensor trust ratio (apex multi_tensor_lamb semantics).
#include "optim/optimizer.h"

#include <cmath>

#include "core/error.h"

namespace bert {

Optimizer::Optimizer(const OptimizerConfig& config, const ParamTable& table, Ops& ops)
    : config_(config), ops_(ops), segs_(table.segments(static_cast<float>(config.weight_decay))),
      elems_(table.total_elems) {
  m_ = static_cast<float*>(ops_.alloc(elems_ * sizeof(float)));
  v_ = static_cast<float*>(ops_.alloc(elems_ * sizeof(float)));
  update_ = static_cast<float*>(ops_.alloc(elems_ * sizeof(float)));
}

Optimizer::~Optimizer() {
  ops_.release(update_);
  ops_.release(v_);
  ops_.release(m_);
}

OptimizerResult Optimizer::step(float* params, const float* grads, double lr, double grad_scale) {
  OptimizerResult result;
  std::vector<double> sq(segs_.size());
  ops_.segment_sumsq(sq.data(), grads, segs_);
  double total = 0;
  for (double s : sq) total += s;
  result.grad_norm = std::sqrt(total) * grad_scale;
  if (!std::isfinite(result.grad_norm)) {
    result.skipped = true;
    return result;
  }
  double clip = 1.0;
  if (config_.max_grad_norm > 0 && result.grad_norm > config_.max_grad_norm) {
    clip = result.grad_norm / config_.max_grad_norm;
  }

  const int64_t t = steps_ + 1;
  AdamStepArgs args;
  args.beta1 = static_cast<float>(config_.beta1);
  args.beta2 = static_cast<float>(config_.beta2);
  args.eps = static_cast<float>(config_.eps);
  if (config_.bias_correction) {  // from the same fp32 betas the moment update uses (as apex does)
    args.bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta1), static_cast<double>(t)));
    args.bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta2), static_cast<double>(t)));
  }
  args.grad_scale = static_cast<float>(grad_scale / clip);
  ops_.adam_direction(update_, m_, v_, grads, params, segs_, args);

  std::vector<float> scale(segs_.size(), static_cast<float>(lr));
  if (config_.name == "lamb") {
    std::vector<double> p_sq(segs_.size()), u_sq(segs_.size());
    ops_.segment_sumsq(p_sq.data(), params, segs_);
    ops_.segment_sumsq(u_sq.data(), update_, segs_);
    for (size_t s = 0; s < segs_.size(); ++s) {
      if (segs_[s].weight_decay == 0.0f && !config_.nvlamb) continue;
      const double p_norm = std::sqrt(p_sq[s]), u_norm = std::sqrt(u_sq[s]);
      if (p_norm > 0 && u_norm > 0) scale[s] = static_cast<float>(lr * p_norm / u_norm);
    }
  }
  ops_.apply_update(params, update_, segs_, scale);
  ops_.weights_changed();
  steps_ = t;
  return result;
}

}  // namespace bert
