// The dense layer's GEMMs on the GPU, each written once: CudaOps (cuda_linear.cpp) runs them and
// the cost model (src/perf/cost_model_ops.cpp) counts them. CUDA-free.
#pragma once

#include <cstdint>

#include "backend/cuda/gemm_args.h"
#include "core/act.h"
#include "core/op_params.h"

namespace bert {

// [M, N] = in [M, K] · W[N, K]^T, its bias `b` (or null) not yet attached to an epilogue; the
// caller sets C, the epilogue and aux.
inline GemmArgs linear_fwd_gemm(ConstAct in, const float* W, const float* b, int64_t M, int K, int N) {
  return {.trans_b = true, .m = M, .n = N, .k = K, .A = in, .lda = K, .B = W, .ldb = K, .ldc = N, .bias = b};
}

// Whether the forward runs bias + tanh-GELU in the GEMM's epilogue (GELU_AUX_BIAS: out and pre_act
// from one GEMM), given whether the GEMM library computes that epilogue in the tanh form.
inline bool linear_fuses_gelu(Activation act, const float* b, int N, bool epilogue_is_gelu_tanh) {
  return act == Activation::gelu_tanh && epilogue_is_gelu_tanh && b != nullptr && N % 8 == 0;
}

// dW[N, K] += dpre[M, N]^T · in[M, K]
inline GemmArgs linear_weight_grad_gemm(ConstAct dpre, ConstAct in, float* dW, int64_t M, int K, int N) {
  return {.trans_a = true, .m = N, .n = K, .k = M, .A = dpre, .lda = N, .B = in, .ldb = K, .C = dW, .ldc = K,
          .beta = 1.0f};
}

// din[M, K] (+)= dpre[M, N] · W[N, K]
inline GemmArgs linear_input_grad_gemm(ConstAct dpre, const float* W, Act din, int64_t M, int K, int N,
                                       bool accumulate) {
  return {.m = M, .n = K, .k = N, .A = dpre, .lda = N, .B = W, .ldb = K, .C = din, .ldc = K,
          .beta = accumulate ? 1.0f : 0.0f};
}

}  // namespace bert
