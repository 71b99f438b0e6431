// Row-major GEMMs through cuBLASLt: C = alpha·op(A)·op(B) + beta·C with optional bias and
// bias+GELU(aux) epilogues, strided batches, fp32/TF32/bf16/fp16-input precision (fp32
// accumulation always), a 32 MiB workspace and a cache of chosen algorithms keyed by shape,
// strides, precision, epilogue, output type and pointer alignment. In bf16/fp16 mode an fp32
// operand inside the registered weight range is read from the WeightMirror, a 16-bit one (an
// activation stored in 16 bits) directly, and C may be 16-bit too (rounded from the fp32
// accumulator; its bias then comes from the mirror, its aux matrix is 16-bit).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/gemm_args.h"
#include "backend/cuda/weight_mirror.h"
#include "core/act.h"

namespace bert {

// The 16-bit format of a bf16/fp16 GEMM precision.
kernels::LowPrecision lowp_kind(Precision precision);

class LtGemm {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  LtGemm(Precision precision, DeviceMemory& memory, cudaStream_t stream);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  Precision precision() const { return precision_; }
  // The low-precision weight copy (bf16/fp16 modes only; null otherwise).
  WeightMirror* weights() { return weights_.get(); }
  // Runs the GEMM; throws Error(backend) when cuBLASLt has no algorithm for it. A bias epilogue
  // cuBLASLt refuses (beta 0, one batch) runs as C = bias rows, then C = A·B + C, with a warning.
  void run(const GemmArgs& args);
  // False when cuBLASLt offers no algorithm for these arguments (used to probe epilogues).
  bool supported(const GemmArgs& args);

  // Operand staging (fp32 data in bf16/fp16 modes; nothing to do otherwise, 16-bit data is read as
  // it is): casts data[0, n) to 16 bits once, and GEMMs read operands inside that range from the
  // copy instead of casting them per call, until unstage_to(). Attention stages qkv once per layer instead of casting slices of
  // it for every sequence and GEMM. At most kMaxStaged ranges at once; unstage_to(k) keeps the
  // first k.
  static constexpr int kMaxStaged = 4;
  void stage(ConstAct data, int64_t n);
  int staged_count() const { return staged_count_; }
  void unstage_to(int count) { staged_count_ = count < staged_count_ ? count : staged_count_; }

 private:
  struct Plan;
  using Key = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, int, int, int>;
  // The algorithms cuBLASLt's heuristic offered for a GEMM, best first (none: no algorithm). A
  // call tries them in order while cuBLASLt refuses one at run time (NOT_SUPPORTED), and moves
  // the one that ran to the front.
  static constexpr int kHeuristicResults = 4;
  struct CachedAlgo {
    std::vector<cublasLtMatmulAlgo_t> algos;
    bool found() const { return !algos.empty(); }
  };

  bool low_precision() const;
  // The 16-bit version of operand x (span elements): x itself when stored in 16 bits, the weight
  // mirror's, a staged copy, else a copy in scratch, cast only when `cast` (supported() needs the
  // pointer's alignment, not the data).
  const void* lowp_operand(ConstAct x, int64_t span, ScratchBuffer& scratch, bool cast);
  // The bias as the epilogue reads it: fp32, or 16-bit (mirror or scratch copy) for a 16-bit C.
  const void* epilogue_bias(const GemmArgs& args, bool cast);
  // The storage type of this precision's 16-bit operands.
  DType lowp_dtype() const;
  // cuBLASLt's A and B (our B and A): the fp32 inputs, or their 16-bit versions in bf16/fp16.
  std::pair<const void*, const void*> lt_operands(const GemmArgs& args, bool cast);
  // Fills plan's descriptors; a_lt/b_lt are cuBLASLt's A and B (our B and A, or 16-bit copies),
  // bias_lt the epilogue's bias.
  void build_plan(const GemmArgs& args, const void* a_lt, const void* b_lt, const void* bias_lt, Plan& plan) const;
  Key key_of(const GemmArgs& args, const Plan& plan) const;
  CachedAlgo& algorithm(const GemmArgs& args, const Plan& plan);
  // Error(backend) naming the GEMM when cuBLASLt offered no algorithm.
  void require(const CachedAlgo& algo, const GemmArgs& args) const;
  // Runs the GEMM with the first algorithm cuBLASLt accepts at run time; Error(backend) naming the
  // GEMM when it refuses them all.
  void matmul(const GemmArgs& args, const Plan& plan, CachedAlgo& algo);
  // The bias epilogue refused: the bias broadcast into C, then beta = 1.
  void run_bias_as_c(const GemmArgs& args, const void* a_lt, const void* b_lt, const void* bias_lt);

  Precision precision_;
  DeviceMemory& memory_;
  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  ScratchBuffer a_lowp_, b_lowp_, bias_lowp_;  // 16-bit copies of A, B and a bias in bf16/fp16 mode
  struct Staged {
    const float* base = nullptr;
    int64_t n = 0;
    const char* copy = nullptr;  // n 16-bit values
  };
  Staged staged_[kMaxStaged];
  std::unique_ptr<ScratchBuffer> staged_copies_[kMaxStaged];
  int staged_count_ = 0;
  std::unique_ptr<WeightMirror> weights_;
  std::map<Key, CachedAlgo> cache_;
  std::set<std::pair<int64_t, int64_t>> bias_as_c_logged_;  // (n, k) of refused bias epilogues warned about
};

}  // namespace bert
