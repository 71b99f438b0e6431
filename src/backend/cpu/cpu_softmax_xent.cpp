// Softmax cross-entropy on the CPU over the first V columns of each logits row (the padded
// vocabulary columns V..ld-1 are excluded). Row statistics are taken before any write, so the
// gradient may overwrite the logits in place.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_vector_math.h"
#include "core/error.h"

namespace bert {

void CpuOps::softmax_xent_impl(const SoftmaxXentArgs& a) {
  float* dlogits = a.dlogits.f32();
  const float* logits = a.logits.f32();
  const float grad_scale = a.grad_scale.value;
  for (int64_t i = 0; i < a.M; ++i) {
    BERT_CHECK(a.labels[i] < a.V, Code::invalid_argument, "softmax_xent: label ", a.labels[i],
               " of row ", i, " is not below the vocabulary size ", a.V);
  }
#pragma omp parallel for num_threads(threads_) if (a.M * a.V > kParallelElements)
  for (int64_t i = 0; i < a.M; ++i) {
    const float* x = logits + i * a.ld;  // [ld]
    float* dx = dlogits + i * a.ld;      // [ld], may be x
    const int32_t label = a.labels[i];
    if (label < 0) {
      a.losses[i] = 0.0f;
      if (a.correct != nullptr) a.correct[i] = 0;
      std::fill(dx, dx + a.ld, 0.0f);
      continue;
    }
    int argmax = 0;
    for (int j = 1; j < a.V; ++j) {
      if (x[j] > x[argmax]) argmax = j;
    }
    const float row_max = x[argmax];
    const float target = x[label];
    const bool correct_row = argmax == label;
    // e_j = exp(x_j - max) lands in dx (which may be x: everything read from x is read above).
    for (int j = 0; j < a.V; ++j) dx[j] = x[j] - row_max;
    vector_exp(dx, dx, a.V);
    double sum = 0.0;
    for (int j = 0; j < a.V; ++j) sum += dx[j];
    const double log_sum = std::log(sum);
    a.losses[i] = static_cast<float>(row_max + log_sum - target);
    if (a.correct != nullptr) a.correct[i] = correct_row ? 1 : 0;
    const double inv_sum = 1.0 / sum;
    const double e_label = dx[label];
    for (int j = 0; j < a.V; ++j) dx[j] = static_cast<float>(dx[j] * inv_sum) * grad_scale;
    dx[label] = static_cast<float>((e_label * inv_sum - 1.0) * grad_scale);
    std::fill(dx + a.V, dx + a.ld, 0.0f);
  }
}

}  // namespace bert
