// Row-major GEMMs through cuBLASLt: C = alpha·op(A)·op(B) + beta·C with optional bias and
// bias+GELU(aux) epilogues, strided batches, fp32/TF32/bf16-input precision (fp32 accumulation
// and fp32 outputs always), a 32 MiB workspace and a cache of chosen algorithms keyed by
// shape, strides, precision, epilogue and pointer alignment.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_memory.h"

namespace bert {

enum class GemmEpilogue { none, bias, gelu_aux_bias };

// One row-major (batched) GEMM: C[m,n] = alpha · op(A)[m,k] · op(B)[k,n] + beta · C.
// op(A) = A^T when trans_a (A stored [k,m]); likewise B. lda/ldb/ldc are row strides in
// elements; stride_* are batch strides. bias [n] is added per row (epilogue bias);
// gelu_aux_bias writes C = gelu(pre) and aux[m,n] (ld ldc) = pre = A·B + bias.
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const float* A = nullptr;
  int64_t lda = 0, stride_a = 0;
  const float* B = nullptr;
  int64_t ldb = 0, stride_b = 0;
  float* C = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  GemmEpilogue epilogue = GemmEpilogue::none;
  const float* bias = nullptr;
  float* aux = nullptr;
};

class LtGemm {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  LtGemm(GemmPrecision precision, DeviceMemory& memory, cudaStream_t stream);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  GemmPrecision precision() const { return precision_; }
  // Runs the GEMM; throws Error(backend) when cuBLASLt has no algorithm for it.
  void run(const GemmArgs& args);
  // False when cuBLASLt offers no algorithm for these arguments (used to probe epilogues).
  bool supported(const GemmArgs& args);

 private:
  struct Plan;
  using Key = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, int, int, int>;
  struct CachedAlgo {
    bool found = false;
    cublasLtMatmulAlgo_t algo{};
  };

  // Fills plan's descriptors; a_lt/b_lt are cuBLASLt's A and B (our B and A, or bf16 copies).
  void build_plan(const GemmArgs& args, const void* a_lt, const void* b_lt, Plan& plan) const;
  Key key_of(const GemmArgs& args) const;
  const CachedAlgo& algorithm(const GemmArgs& args, const Plan& plan);

  GemmPrecision precision_;
  DeviceMemory& memory_;
  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  ScratchBuffer a_lowp_, b_lowp_;  // bf16 copies of A and B in bf16 mode
  std::map<Key, CachedAlgo> cache_;
};

}  // namespace bert
