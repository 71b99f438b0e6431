// Activation functions of the linear epilogues (GELU erf/tanh forms, tanh) and their
// derivatives, in fp32: the scalar forms (the specification, used by tests and the emulated GPU
// kernels) and the array forms the CPU ops run, vectorised through cpu_vector_math.h.
// dispatch_activation turns the runtime enum into a compile-time tag so the per-element loops
// carry no switch.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/ops.h"

namespace bert {

template <Activation A>
using ActivationTag = std::integral_constant<Activation, A>;

template <Activation A>
inline float activate(float x) {
  if constexpr (A == Activation::gelu_erf) {
    return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
  } else if constexpr (A == Activation::gelu_tanh) {
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(u));
  } else if constexpr (A == Activation::tanh) {
    return std::tanh(x);
  } else {
    return x;
  }
}

// d act(x) / dx at the pre-activation x.
template <Activation A>
inline float activation_grad(float x) {
  if constexpr (A == Activation::gelu_erf) {
    const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * std::exp(-0.5f * x * x);
    return cdf + x * pdf;
  } else if constexpr (A == Activation::gelu_tanh) {
    const float k0 = 0.79788456080286536f, k1 = 0.044715f;
    const float t = std::tanh(k0 * (x + k1 * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * x * x);
  } else if constexpr (A == Activation::tanh) {
    const float t = std::tanh(x);
    return 1.0f - t * t;
  } else {
    return 1.0f;
  }
}

template <typename F>
inline void dispatch_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::none: f(ActivationTag<Activation::none>{}); break;
    case Activation::gelu_erf: f(ActivationTag<Activation::gelu_erf>{}); break;
    case Activation::gelu_tanh: f(ActivationTag<Activation::gelu_tanh>{}); break;
    case Activation::tanh: f(ActivationTag<Activation::tanh>{}); break;
  }
}

// out[i] = act(pre[i]) over n elements (out may equal pre).
void activation_array(Activation act, float* out, const float* pre, int64_t n);
// dpre[i] = dout[i] · act'(pre[i]) over n elements (dpre may equal dout).
void activation_grad_array(Activation act, float* dpre, const float* dout, const float* pre, int64_t n);

}  // namespace bert
