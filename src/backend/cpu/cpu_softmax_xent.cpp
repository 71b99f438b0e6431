// Softmax cross-entropy on the CPU over the first V columns of each logits row (the padded
// vocabulary columns V..ld-1 are excluded). Row statistics are taken before any write, so the
// gradient may overwrite the logits in place.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_vector_math.h"
#include "core/error.h"

namespace bert {

void CpuOps::softmax_xent_f32(float* dlogits, float* losses, int32_t* correct, const float* logits,
                               const int32_t* labels, int64_t M, int V, int ld, float grad_scale) {
  for (int64_t i = 0; i < M; ++i) {
    BERT_CHECK(labels[i] < V, Code::invalid_argument, "softmax_xent: label ", labels[i],
               " of row ", i, " is not below the vocabulary size ", V);
  }
#pragma omp parallel for num_threads(threads_) if (M * V > kParallelElements)
  for (int64_t i = 0; i < M; ++i) {
    const float* x = logits + i * ld;  // [ld]
    float* dx = dlogits + i * ld;      // [ld], may be x
    const int32_t label = labels[i];
    if (label < 0) {
      losses[i] = 0.0f;
      if (correct != nullptr) correct[i] = 0;
      std::fill(dx, dx + ld, 0.0f);
      continue;
    }
    int argmax = 0;
    for (int j = 1; j < V; ++j) {
      if (x[j] > x[argmax]) argmax = j;
    }
    const float row_max = x[argmax];
    const float target = x[label];
    const bool correct_row = argmax == label;
    // e_j = exp(x_j - max) lands in dx (which may be x: everything read from x is read above).
    for (int j = 0; j < V; ++j) dx[j] = x[j] - row_max;
    vector_exp(dx, dx, V);
    double sum = 0.0;
    for (int j = 0; j < V; ++j) sum += dx[j];
    const double log_sum = std::log(sum);
    losses[i] = static_cast<float>(row_max + log_sum - target);
    if (correct != nullptr) correct[i] = correct_row ? 1 : 0;
    const double inv_sum = 1.0 / sum;
    const double e_label = dx[label];
    for (int j = 0; j < V; ++j) dx[j] = static_cast<float>(dx[j] * inv_sum) * grad_scale;
    dx[label] = static_cast<float>((e_label * inv_sum - 1.0) * grad_scale);
    std::fill(dx + V, dx + ld, 0.0f);
  }
}

}  // namespace bert
