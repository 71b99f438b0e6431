// Plain parameter types of the numeric ops, shared by the Ops interface (src/backend) and the
// CUDA kernels (kernels/), which depend on core only: the activation kinds, one dropout
// application, the arguments of the Adam moment update and an optimizer step's scalars.
#pragma once

#include <cstdint>

namespace bert {

enum class Activation { none, gelu_erf, gelu_tanh, tanh };

// One dropout application. Element i of the tensor is kept when
// philox_uniform_at(seed, step, tensor_id, i) >= p, and kept values are scaled by 1/(1-p).
// p == 0 means identity (no random numbers drawn).
struct DropoutSite {
  uint64_t seed = 0;
  uint64_t step = 0;
  uint32_t tensor_id = 0;
  float p = 0.0f;
  // Backend memory holding `step` when the work runs, or null. A recorded step (CUDA graph)
  // replays with the step of each replay there; backends that compute as they are called may
  // read `step`, which equals it at the call.
  const uint64_t* step_at = nullptr;
};
// The scale of kept elements, 1 / (1 - p), rounded to float once.
inline float dropout_keep_scale(const DropoutSite& site) { return 1.0f / (1.0f - site.p); }

// A scale factor an op applies: `value`, or, when `at` is set, the float in backend memory at `at`
// when the work runs (recorded work replays with each replay's value there). Backends that compute
// as they are called may read `value`, which equals *at at the call.
struct ScaleArg {
  float value = 1.0f;
  const float* at = nullptr;
  ScaleArg(float v = 1.0f, const float* a = nullptr) : value(v), at(a) {}  // NOLINT: a float converts
};

// Adam moment update shared by LAMB and AdamW (see optim/).
struct AdamStepArgs {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-6f;
  float bias_correction1 = 1.0f;  // 1 - beta1^t (1 when bias correction is off)
  float bias_correction2 = 1.0f;  // 1 - beta2^t
  float grad_scale = 1.0f;        // applied to the raw gradient first (averaging and clipping)
};

// Which tensors' updates LAMB scales by their trust ratio ‖p‖/‖u‖: none (AdamW), those with
// weight decay (LAMB), or all (NVLAMB).
enum class TrustRatio { none, decayed, all };

// The scalars of one unsharded optimizer step (Ops::optimizer_step), in backend memory: the host
// writes the inputs before the step, the step derives adam.grad_scale, grad_norm and skipped from
// the gradient on the device, and the host reads grad_norm and skipped after it. A recorded
// optimizer step (CUDA graph) replays with each step's inputs there.
struct OptimizerStepState {
  double grad_scale = 1.0;     // in: 1 / (micro-batches × ranks × loss scale), on the raw gradient
  double max_grad_norm = 0.0;  // in: global-norm clipping; 0 disables
  double lr = 0.0;             // in
  AdamStepArgs adam;           // in: betas, eps, bias corrections; its grad_scale is derived
  double grad_norm = 0.0;      // out: of the scaled gradient, before clipping
  int32_t skipped = 0;         // out: 1 for a non-finite grad_norm (moments and weights kept)
};

}  // namespace bert
