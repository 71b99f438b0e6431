// One GEMM as the CUDA backend asks cuBLASLt for it (LtGemm::run), CUDA-free so that the cost
// model (src/perf/cost_model_ops.cpp) and the attention's launch plan (attention_plan.h) describe
// the same GEMMs with the same struct.
#pragma once

#include <cstdint>

#include "core/act.h"

namespace bert {

enum class GemmEpilogue { none, bias, gelu_aux_bias };

// One row-major (batched) GEMM: C[m,n] = alpha · op(A)[m,k] · op(B)[k,n] + beta · C.
// op(A) = A^T when trans_a (A stored [k,m]); likewise B. lda/ldb/ldc are row strides in
// elements; stride_* are batch strides. bias [n] (fp32) is added per row (epilogue bias);
// gelu_aux_bias writes C = gelu(pre) and aux[m,n] (ld ldc, C's type) = pre = A·B + bias.
// A, B and C are fp32 or, in bf16/fp16 mode, of that 16-bit type (C with beta != 0 included).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  ConstAct A;
  int64_t lda = 0, stride_a = 0;
  ConstAct B;
  int64_t ldb = 0, stride_b = 0;
  Act C;
  int64_t ldc = 0, stride_c = 0;
  int batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  GemmEpilogue epilogue = GemmEpilogue::none;
  const float* bias = nullptr;
  Act aux;
};

}  // namespace bert
