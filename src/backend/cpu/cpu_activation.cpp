// The array forms of the activations: each block of elements goes through one vectorised
// exp/erf/tanh call and simple loops the compiler vectorises, with the same operations in the
// same order as the scalar forms in cpu_activation.h (only the libm function differs). The loops
// run in instruction-set clones compiled without contraction, so every clone keeps those bits.
#include "backend/cpu/cpu_activation.h"

#include <algorithm>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_vector_math.h"

namespace bert {
namespace {

constexpr int64_t kBlock = 256;  // elements per vector-math call (two stack buffers)
constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kTanhK0 = 0.79788456080286536f, kTanhK1 = 0.044715f;

}  // namespace

BERT_CPU_CLONES_EXACT
void activation_array(Activation act, float* out, const float* pre, int64_t n) {
  float t[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const float* x = pre + b;
    float* y = out + b;
    switch (act) {
      case Activation::none:
        std::copy(x, x + m, y);
        break;
      case Activation::gelu_erf:
        for (int64_t i = 0; i < m; ++i) t[i] = x[i] * kInvSqrt2;
        vector_erf(t, t, m);
        for (int64_t i = 0; i < m; ++i) y[i] = 0.5f * x[i] * (1.0f + t[i]);
        break;
      case Activation::gelu_tanh:
        for (int64_t i = 0; i < m; ++i) t[i] = kTanhK0 * (x[i] + kTanhK1 * x[i] * x[i] * x[i]);
        vector_tanh(t, t, m);
        for (int64_t i = 0; i < m; ++i) y[i] = 0.5f * x[i] * (1.0f + t[i]);
        break;
      case Activation::tanh:
        vector_tanh(y, x, m);
        break;
    }
  }
}

BERT_CPU_CLONES_EXACT
void activation_grad_array(Activation act, float* dpre, const float* dout, const float* pre, int64_t n) {
  float t[kBlock], e[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const float* x = pre + b;
    const float* g = dout + b;
    float* d = dpre + b;
    switch (act) {
      case Activation::none:
        std::copy(g, g + m, d);
        break;
      case Activation::gelu_erf:
        for (int64_t i = 0; i < m; ++i) t[i] = x[i] * kInvSqrt2, e[i] = -0.5f * x[i] * x[i];
        vector_erf(t, t, m);
        vector_exp(e, e, m);
        for (int64_t i = 0; i < m; ++i) {
          const float cdf = 0.5f * (1.0f + t[i]);
          const float pdf = kInvSqrt2Pi * e[i];
          d[i] = g[i] * (cdf + x[i] * pdf);
        }
        break;
      case Activation::gelu_tanh:
        for (int64_t i = 0; i < m; ++i) t[i] = kTanhK0 * (x[i] + kTanhK1 * x[i] * x[i] * x[i]);
        vector_tanh(t, t, m);
        for (int64_t i = 0; i < m; ++i) {
          const float grad = 0.5f * (1.0f + t[i]) + 0.5f * x[i] * (1.0f - t[i] * t[i]) * kTanhK0 *
                                                        (1.0f + 3.0f * kTanhK1 * x[i] * x[i]);
          d[i] = g[i] * grad;
        }
        break;
      case Activation::tanh:
        vector_tanh(t, x, m);
        for (int64_t i = 0; i < m; ++i) d[i] = g[i] * (1.0f - t[i] * t[i]);
        break;
    }
  }
}

}  // namespace bert
