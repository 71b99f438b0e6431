// Device forms of the activations (GELU erf/tanh, tanh) and their derivatives, written with the
// same constants and operation order as the CPU reference (backend/cpu/cpu_activation.h).
#pragma once

#include <cuda_runtime.h>

#include "core/op_params.h"

namespace bert::kernels {

template <Activation A>
__device__ __forceinline__ float activate(float x) {
  if constexpr (A == Activation::gelu_erf) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else if constexpr (A == Activation::gelu_tanh) {
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  } else if constexpr (A == Activation::tanh) {
    return tanhf(x);
  } else {
    return x;
  }
}

template <Activation A>
__device__ __forceinline__ float activation_grad(float x) {
  if constexpr (A == Activation::gelu_erf) {
    const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return cdf + x * pdf;
  } else if constexpr (A == Activation::gelu_tanh) {
    const float k0 = 0.79788456080286536f, k1 = 0.044715f;
    const float t = tanhf(k0 * (x + k1 * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * x * x);
  } else if constexpr (A == Activation::tanh) {
    const float t = tanhf(x);
    return 1.0f - t * t;
  } else {
    return 1.0f;
  }
}

}  // namespace bert::kernels
