// LtGemm: maps row-major GEMMs onto cuBLASLt's column-major API (C^T = op(B)^T · op(A)^T, so
// B is passed as cuBLASLt's A), builds descriptors per call and caches the heuristic's
// algorithm per shape/precision/epilogue/output type/alignment. In bf16/fp16 mode a 16-bit operand
// is read as it is, an fp32 one inside the registered weight range from the WeightMirror; other fp32
// operands are first cast to 16-bit scratch copies covering exactly the span the GEMM reads.
// Where cuBLASLt offers no bias epilogue for a shape, the bias is written into C first and added
// with beta = 1.
#include "backend/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "backend/cuda/cuda_check.h"
#include "core/log.h"
#include "kernels/cast.h"
#include "kernels/rows.h"

namespace bert {
namespace {

// Elements from the first to one past the last element a (batched) row-major operand touches.
int64_t operand_span(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int batch) {
  return (rows - 1) * ld + cols + static_cast<int64_t>(batch - 1) * stride;
}

// Largest power of two (<= 256) dividing the address; cuBLASLt's alignment preferences.
uint32_t alignment_of(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && addr % a != 0) a /= 2;
  return a;
}

// Alignment every matrix of a (batched) operand keeps: its pointer, its row stride and its batch
// stride in bytes, conservatively combined.
uint32_t operand_alignment(const void* p, int64_t ld, int64_t stride, int batch, size_t elem) {
  uint32_t a = alignment_of(p);
  a = std::min(a, alignment_of(reinterpret_cast<const void*>(static_cast<uintptr_t>(ld * elem))));
  if (batch > 1)
    a = std::min(a, alignment_of(reinterpret_cast<const void*>(
                        static_cast<uintptr_t>(stride * static_cast<int64_t>(elem)))));
  return a;
}

cudaDataType_t cuda_type(DType type) {
  return type == DType::bf16 ? CUDA_R_16BF : type == DType::f16 ? CUDA_R_16F : CUDA_R_32F;
}

int log2_of(uint32_t a) {
  int l = 0;
  while ((1u << l) < a) ++l;
  return l;
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <typename T>
void set_layout(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                const T& value) {
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attr, &value, sizeof(value)));
}

}  // namespace

kernels::LowPrecision lowp_kind(Precision precision) {
  return precision == Precision::fp16 ? kernels::LowPrecision::fp16
                                          : kernels::LowPrecision::bf16;
}

// Descriptors of one call (column-major view): D'[n,m] = op(B') · op(A'), where B' is our A
// and A' is our B.
struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  const void* a_ptr = nullptr;  // cuBLASLt's A = our B
  const void* b_ptr = nullptr;  // cuBLASLt's B = our A
  uint32_t align_a = 256, align_b = 256, align_c = 256;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

LtGemm::LtGemm(Precision precision, DeviceMemory& memory, cudaStream_t stream)
    : precision_(precision),
      memory_(memory),
      stream_(stream),
      a_lowp_(memory, stream),
      b_lowp_(memory, stream),
      bias_lowp_(memory, stream) {
  if (low_precision())
    weights_ = std::make_unique<WeightMirror>(memory, stream, lowp_kind(precision));
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_ = memory_.alloc(kWorkspaceBytes);
}

LtGemm::~LtGemm() {
  if (workspace_ != nullptr) {
    try {
      memory_.release(workspace_);
    } catch (const Error&) {
      // Destructors must not throw; the device is being torn down anyway.
    }
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

bool LtGemm::low_precision() const {
  return precision_ == Precision::bf16 || precision_ == Precision::fp16;
}

DType LtGemm::lowp_dtype() const { return precision_ == Precision::fp16 ? DType::f16 : DType::bf16; }

LtGemm::Key LtGemm::key_of(const GemmArgs& g, const Plan& plan) const {
  // The alignments of the operands cuBLASLt actually reads (16-bit copies in bf16/fp16 mode).
  const int align = log2_of(plan.align_a) | (log2_of(plan.align_b) << 4) |
                    (log2_of(plan.align_c) << 8) | (g.beta != 0.0f ? 1 << 12 : 0) |
                    (static_cast<int>(g.C.type) << 13);
  return Key(g.trans_a, g.trans_b, static_cast<int>(precision_), g.m, g.n, g.k, g.lda, g.ldb,
             g.ldc, g.stride_a, g.stride_b, g.stride_c, g.batch, static_cast<int>(g.epilogue),
             align);
}

LtGemm::CachedAlgo& LtGemm::algorithm(const GemmArgs& g, const Plan& plan) {
  const Key key = key_of(g, plan);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  check_not_capturing(stream_, "a cuBLASLt algorithm query for a GEMM shape not run before (m=", g.m, " n=", g.n,
                      " k=", g.k, " batch=", g.batch, ")");
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CachedAlgo entry;
  try {
    const uint64_t workspace = kWorkspaceBytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &plan.align_a, sizeof(uint32_t)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &plan.align_b, sizeof(uint32_t)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &plan.align_c, sizeof(uint32_t)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &plan.align_c, sizeof(uint32_t)));
    cublasLtMatmulHeuristicResult_t results[kHeuristicResults] = {};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, kHeuristicResults, results, &found);
    if (st == CUBLAS_STATUS_SUCCESS) {
      for (int i = 0; i < found && i < kHeuristicResults; ++i)
        if (results[i].state == CUBLAS_STATUS_SUCCESS) entry.algos.push_back(results[i].algo);
    } else if (st != CUBLAS_STATUS_NOT_SUPPORTED) {
      CUBLAS_CHECK(st);
    }
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  return cache_.emplace(key, entry).first->second;
}

void LtGemm::build_plan(const GemmArgs& g, const void* a_lt, const void* b_lt, const void* bias_lt,
                        Plan& plan) const {
  const bool lowp = low_precision();
  const cudaDataType_t in_type = precision_ == Precision::bf16   ? CUDA_R_16BF
                                 : precision_ == Precision::fp16 ? CUDA_R_16F
                                                                     : CUDA_R_32F;
  const cublasComputeType_t compute =
      precision_ == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F));
  // cuBLASLt's A is our B: transposed exactly when our B is; likewise for our A.
  const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  // Column-major views of the row-major storage: a row-major [r, c] matrix is col-major [c, r].
  // Our B is stored [k, n] (or [n, k] when trans_b); our A [m, k] (or [k, m] when trans_a).
  const uint64_t a_rows = g.trans_b ? g.k : g.n, a_cols = g.trans_b ? g.n : g.k;
  const uint64_t b_rows = g.trans_a ? g.m : g.k, b_cols = g.trans_a ? g.k : g.m;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, in_type, a_rows, a_cols, g.ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, in_type, b_rows, b_cols, g.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, cuda_type(g.C.type), g.n, g.m, g.ldc));
  if (g.batch > 1) {
    const int32_t batch = g.batch;
    set_layout(plan.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch);
    set_layout(plan.b, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch);
    set_layout(plan.c, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch);
    set_layout(plan.a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, g.stride_b);
    set_layout(plan.b, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, g.stride_a);
    set_layout(plan.c, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, g.stride_c);
  }
  if (g.epilogue != GemmEpilogue::none) {
    const cublasLtEpilogue_t epi = g.epilogue == GemmEpilogue::bias
                                       ? CUBLASLT_EPILOGUE_BIAS
                                       : CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_lt);
    if (g.epilogue == GemmEpilogue::gelu_aux_bias) {
      set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux.data);
      const int64_t aux_ld = g.ldc;
      set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
    }
  }
  plan.a_ptr = a_lt;
  plan.b_ptr = b_lt;
  const size_t in_elem = lowp ? 2 : 4;
  plan.align_a = operand_alignment(a_lt, g.ldb, g.stride_b, g.batch, in_elem);
  plan.align_b = operand_alignment(b_lt, g.lda, g.stride_a, g.batch, in_elem);
  plan.align_c = std::min(operand_alignment(g.C.data, g.ldc, g.stride_c, g.batch, dtype_bytes(g.C.type)),
                          g.aux.data != nullptr ? alignment_of(g.aux.data) : uint32_t{256});
}

void LtGemm::stage(ConstAct operand, int64_t n) {
  if (!low_precision() || n <= 0 || operand.type != DType::f32) return;
  const float* data = operand.f32();
  BERT_CHECK(staged_count_ < kMaxStaged, Code::internal, "LtGemm::stage: more than ", kMaxStaged, " staged ranges");
  std::unique_ptr<ScratchBuffer>& copy = staged_copies_[staged_count_];
  if (!copy) copy = std::make_unique<ScratchBuffer>(memory_, stream_);
  void* bits = copy->get(static_cast<size_t>(n) * 2);
  kernels::cast_to_lowp(bits, data, n, 1.0f, lowp_kind(precision_), stream_);
  staged_[staged_count_++] = Staged{data, n, static_cast<const char*>(bits)};
}

const void* LtGemm::lowp_operand(ConstAct operand, int64_t span, ScratchBuffer& scratch, bool cast) {
  if (operand.type != DType::f32) return operand.data;  // checked to be lowp_dtype() by run()
  const float* x = operand.f32();
  if (const void* mirrored = weights_->find(x, span)) return mirrored;
  const std::less<const float*> before;
  for (int i = 0; i < staged_count_; ++i) {
    const Staged& s = staged_[i];
    if (!before(x, s.base) && x + span <= s.base + s.n) return s.copy + (x - s.base) * 2;
  }
  void* copy = scratch.get(static_cast<size_t>(span) * 2);
  if (cast) kernels::cast_to_lowp(copy, x, span, 1.0f, lowp_kind(precision_), stream_);
  return copy;
}

std::pair<const void*, const void*> LtGemm::lt_operands(const GemmArgs& g, bool cast) {
  if (!low_precision()) return {g.B.data, g.A.data};
  const int64_t span_b = g.trans_b ? operand_span(g.n, g.k, g.ldb, g.stride_b, g.batch)
                                   : operand_span(g.k, g.n, g.ldb, g.stride_b, g.batch);
  const int64_t span_a = g.trans_a ? operand_span(g.k, g.m, g.lda, g.stride_a, g.batch)
                                   : operand_span(g.m, g.k, g.lda, g.stride_a, g.batch);
  return {lowp_operand(g.B, span_b, b_lowp_, cast), lowp_operand(g.A, span_a, a_lowp_, cast)};
}

const void* LtGemm::epilogue_bias(const GemmArgs& g, bool cast) {
  if (g.bias == nullptr || g.C.type == DType::f32) return g.bias;
  return lowp_operand(g.bias, g.n, bias_lowp_, cast);
}

// Probes with the pointers run() will use, so both look up the same algorithm.
bool LtGemm::supported(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.k == 0 || g.batch == 0) return true;
  const auto [a_lt, b_lt] = lt_operands(g, false);
  Plan plan;
  build_plan(g, a_lt, b_lt, epilogue_bias(g, false), plan);
  return algorithm(g, plan).found();
}

void LtGemm::run(const GemmArgs& g) {
  BERT_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0, Code::invalid_argument,
             "gemm: bad shape m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  BERT_CHECK(g.k > 0, Code::invalid_argument, "gemm: k=0 is not supported (m=", g.m, " n=", g.n,
             ")");
  for (const DType type : {g.A.type, g.B.type, g.C.type, g.aux.data ? g.aux.type : g.C.type}) {
    BERT_CHECK(type == DType::f32 || (low_precision() && type == lowp_dtype()), Code::internal, "gemm: a ",
               dtype_name(type), " operand in ", precision_name(precision_), " precision (",
               low_precision() ? dtype_name(lowp_dtype()) : "fp32", " or fp32 operands only)");
  }
  BERT_CHECK(g.aux.data == nullptr || g.aux.type == g.C.type, Code::internal, "gemm: aux is ",
             dtype_name(g.aux.type), " but C is ", dtype_name(g.C.type));
  const auto [a_lt, b_lt] = lt_operands(g, true);
  const void* bias_lt = epilogue_bias(g, true);
  Plan plan;
  build_plan(g, a_lt, b_lt, bias_lt, plan);
  CachedAlgo& algo = algorithm(g, plan);
  if (!algo.found() && g.epilogue == GemmEpilogue::bias && g.beta == 0.0f && g.batch == 1) {
    run_bias_as_c(g, a_lt, b_lt, bias_lt);
    return;
  }
  require(algo, g);
  matmul(g, plan, algo);
}

// C = bias in every row, then C = A·B + 1·C: the sum the bias epilogue forms, rounded once into
// C's type (the bias is read in C's type either way).
void LtGemm::run_bias_as_c(const GemmArgs& g, const void* a_lt, const void* b_lt, const void* bias_lt) {
  if (bias_as_c_logged_.insert({g.n, g.k}).second) {  // once per layer shape, whatever the row count
    std::ostringstream os;
    os << "cuBLASLt offers no bias epilogue for gemm m=" << g.m << " n=" << g.n << " k=" << g.k
       << "; its bias is written into C and added as beta * C (one more pass over C)";
    log_message(log_warning, os.str());
  }
  GemmArgs h = g;
  h.epilogue = GemmEpilogue::none;
  h.bias = nullptr;
  h.beta = 1.0f;
  Plan plan;
  build_plan(h, a_lt, b_lt, nullptr, plan);
  CachedAlgo& algo = algorithm(h, plan);
  require(algo, h);
  kernels::broadcast_row(g.C, ConstAct(bias_lt, g.C.type), g.m, static_cast<int>(g.n), g.ldc, stream_);
  matmul(h, plan, algo);
}

void LtGemm::require(const CachedAlgo& algo, const GemmArgs& g) const {
  BERT_CHECK(algo.found(), Code::backend, "cuBLASLt has no algorithm for gemm m=", g.m, " n=", g.n,
             " k=", g.k, " batch=", g.batch, " trans_a=", g.trans_a, " trans_b=", g.trans_b,
             " epilogue=", static_cast<int>(g.epilogue), " beta=", g.beta, " precision=",
             static_cast<int>(precision_));
}

void LtGemm::matmul(const GemmArgs& g, const Plan& plan, CachedAlgo& algo) {
  for (size_t i = 0; i < algo.algos.size(); ++i) {
    const cublasStatus_t st =
        cublasLtMatmul(handle_, plan.desc, &g.alpha, plan.a_ptr, plan.a, plan.b_ptr, plan.b, &g.beta, g.C.data,
                       plan.c, g.C.data, plan.c, &algo.algos[i], workspace_, kWorkspaceBytes, stream_);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) continue;  // refused at run time: the heuristic's next one
    CUBLAS_CHECK(st);
    if (i > 0) std::rotate(algo.algos.begin(), algo.algos.begin() + static_cast<std::ptrdiff_t>(i),
                           algo.algos.end());
    return;
  }
  fail(Code::backend, "cuBLASLt refused at run time all ", algo.algos.size(), " algorithms its heuristic offered for gemm m=",
       g.m, " n=", g.n, " k=", g.k, " batch=", g.batch, " epilogue=", static_cast<int>(g.epilogue));
}

}  // namespace bert
