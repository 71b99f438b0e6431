// Plain parameter types of the numeric ops, shared by the Ops interface (src/backend) and the
// CUDA kernels (kernels/), which depend on core only: the activation kinds, one dropout
// application, and the arguments of the Adam moment update.
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

}  // namespace bert
