// Dense layers on the CPU: out = act(in · W^T + b) with an Eigen GEMM and a fused bias +
// activation epilogue, the activation alone (for recomputation), and the backward pass
// (dW, db accumulate; din overwritten or added).
// Column reductions run over rows in a fixed order, so db does not depend on the thread count.
#include <Eigen/Core>

#include <algorithm>

#include "backend/cpu/cpu_activation.h"
#include "backend/op_checks.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr int kColumnBlock = 32;

}  // namespace

void CpuOps::linear_fwd(float* out, float* pre_act, const float* in, const float* W,
                        const float* b, int64_t M, int K, int N, Activation act) {
  check_linear_shape("linear_fwd", M, K, N);
  BERT_CHECK(act == Activation::none || pre_act != nullptr, Code::invalid_argument,
             "linear_fwd: an activation needs a pre_act buffer");
  if (M == 0) return;
  // With an activation the GEMM lands in pre_act and the epilogue writes out from it.
  float* gemm_out = act == Activation::none ? out : pre_act;  // [M, N]
  MatrixMap y(gemm_out, M, N);
  Eigen::setNbThreads(threads_);
  y.noalias() = ConstMatrixMap(in, M, K) * ConstMatrixMap(W, N, K).transpose();
  if (act == Activation::none && b == nullptr) return;
  dispatch_activation(act, [&](auto tag) {
    constexpr Activation A = decltype(tag)::value;
#pragma omp parallel for num_threads(threads_) if (M * N > 16384)
    for (int64_t i = 0; i < M; ++i) {
      float* row = gemm_out + i * N;
      float* out_row = out + i * N;
      for (int j = 0; j < N; ++j) {
        const float pre = b != nullptr ? row[j] + b[j] : row[j];
        if constexpr (A == Activation::none) {
          out_row[j] = pre;
        } else {
          row[j] = pre;
          out_row[j] = activate<A>(pre);
        }
      }
    }
  });
}

void CpuOps::activation_fwd(float* out, const float* pre, int64_t n, Activation act) {
  check_element_count("activation_fwd", n);
  dispatch_activation(act, [&](auto tag) {
    constexpr Activation A = decltype(tag)::value;
#pragma omp parallel for num_threads(threads_) if (n > 16384)
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (A == Activation::none) {
        out[i] = pre[i];
      } else {
        out[i] = activate<A>(pre[i]);
      }
    }
  });
}

void CpuOps::linear_bwd(float* din, float* dW, float* db, const float* dout, const float* in,
                        const float* W, const float* pre_act, float* dpre_scratch, int64_t M,
                        int K, int N, Activation act, bool accumulate_din) {
  check_linear_shape("linear_bwd", M, K, N);
  check_linear_bwd_buffers(act, pre_act, dpre_scratch);
  if (M == 0) return;
  const float* dpre = dout;  // [M, N]
  if (act != Activation::none) {
    dispatch_activation(act, [&](auto tag) {
      constexpr Activation A = decltype(tag)::value;
#pragma omp parallel for num_threads(threads_) if (M * N > 16384)
      for (int64_t i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          const int64_t e = i * N + j;
          dpre_scratch[e] = dout[e] * activation_grad<A>(pre_act[e]);
        }
      }
    });
    dpre = dpre_scratch;
  }
  if (db != nullptr) {
    const int blocks = (N + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) if (M * N > 16384)
    for (int blk = 0; blk < blocks; ++blk) {
      const int c0 = blk * kColumnBlock, c1 = std::min(N, c0 + kColumnBlock);
      double acc[kColumnBlock] = {};
      for (int64_t i = 0; i < M; ++i) {
        const float* row = dpre + i * N;
        for (int j = c0; j < c1; ++j) acc[j - c0] += row[j];
      }
      for (int j = c0; j < c1; ++j) db[j] += static_cast<float>(acc[j - c0]);
    }
  }
  ConstMatrixMap g(dpre, M, N), x(in, M, K), w(W, N, K);
  Eigen::setNbThreads(threads_);
  if (dW != nullptr) MatrixMap(dW, N, K).noalias() += g.transpose() * x;
  if (din != nullptr) {
    MatrixMap dx(din, M, K);
    if (accumulate_din) {
      dx.noalias() += g * w;
    } else {
      dx.noalias() = g * w;
    }
  }
}

}  // namespace bert
