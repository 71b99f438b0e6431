// The scalar arithmetic of an optimizer step, shared by Optimizer::step on the host, the CPU
// backend's optimizer_step and the CUDA kernels of a device-resident step, so that all give the
// same bits (double throughout; the fp32 values are rounded once, at the end).
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "core/op_params.h"

namespace bert {

// sqrt and isfinite of a double, correctly rounded on both sides (CUDA's device functions, the
// C++ library's on the host).
BERT_HD double sqrt_hd(double x) {
#if defined(__CUDA_ARCH__)
  return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}
BERT_HD bool isfinite_hd(double x) {
#if defined(__CUDA_ARCH__)
  return ::isfinite(x);
#else
  return std::isfinite(x);
#endif
}

// From the per-tensor Σ grad² of the raw gradient (`count` sums, added in order): the gradient
// norm ‖grad‖·grad_scale, the skip flag (a non-finite norm) and the Adam pass's gradient factor,
// grad_scale divided by the clip factor ‖g‖ / max_grad_norm when the norm exceeds it.
BERT_HD void derive_step_scalars(OptimizerStepState& s, const double* grad_sumsq, int count) {
  double total = 0.0;
  for (int i = 0; i < count; ++i) total += grad_sumsq[i];
  s.grad_norm = sqrt_hd(total) * s.grad_scale;
  s.skipped = isfinite_hd(s.grad_norm) ? 0 : 1;
  const double clip = s.max_grad_norm > 0 && s.grad_norm > s.max_grad_norm ? s.grad_norm / s.max_grad_norm : 1.0;
  s.adam.grad_scale = static_cast<float>(s.grad_scale / clip);
}

// The factor of a tensor's update: lr, times the trust ratio ‖p‖/‖u‖ (from Σ p² and Σ u²) when it
// applies and both norms are positive.
BERT_HD float update_scale(double lr, double p_sumsq, double u_sumsq, bool trust_ratio) {
  if (trust_ratio) {
    const double p_norm = sqrt_hd(p_sumsq), u_norm = sqrt_hd(u_sumsq);
    if (p_norm > 0 && u_norm > 0) return static_cast<float>(lr * p_norm / u_norm);
  }
  return static_cast<float>(lr);
}

// Whether a tensor with this weight decay gets the trust ratio.
BERT_HD bool trust_ratio_applies(TrustRatio trust, float weight_decay) {
  return trust == TrustRatio::all || (trust == TrustRatio::decayed && weight_decay != 0.0f);
}

// Segment s's update factor from a direction pass's sums (Σ p² at [s], Σ u² at [segments + s];
// not read when no trust ratio applies, so they may be absent for TrustRatio::none).
BERT_HD float segment_update_scale(double lr, const double* sums, int segments, int s, TrustRatio trust,
                                   float weight_decay) {
  if (!trust_ratio_applies(trust, weight_decay)) return static_cast<float>(lr);
  return update_scale(lr, sums[s], sums[segments + s], true);
}

}  // namespace bert
