// cuBLASLt on the host for the CUDA backend in the kernel emulation: the documented contract of
// cublasLtMatmul, D = epilogue(alpha · op(A) · op(B) + beta · C [+ bias]), column-major layouts
// with leading dimensions, strided batches, fp32/bf16/fp16 inputs (TF32 inputs rounded to 10
// mantissa bits) multiplied in fp32 by Eigen; epilogues BIAS and GELU_AUX_BIAS (GELU in cuBLASLt's tanh
// form, the pre-GELU values to the aux matrix). C/D are fp32, or of the inputs' 16-bit type: then
// the fp32 result is rounded once to D (nearest even) and, as cuBLASLt's defaults have it, the bias
// and the aux matrix are of D's type too. Only the attributes the backend sets are
// accepted; any other is refused with CUBLAS_STATUS_INVALID_VALUE so a new use is noticed. Every
// matrix touched must lie inside one cudaMalloc allocation, which catches wrong ld/stride/shape.
// Each call adds the bytes its layouts describe to the emulator's traffic counters. The product
// is stream work (cuda_emu::enqueue), so a capturing stream records it for graph launches.
// The heuristic offers up to 3 algorithms, each valid for the minimum alignments the preference
// declared (MIN_ALIGNMENT_{A,B,C,D}_BYTES; 256 when not set): cublasLtMatmul refuses
// (NOT_SUPPORTED) an algorithm given a pointer less aligned than that, as cuBLASLt's kernels may
// not run on one. BERT_EMU_LT_REFUSE in the environment makes cuBLASLt refuse more:
// bias_epilogue (no algorithm with the BIAS epilogue), all (none for any GEMM), first_algorithm
// (the heuristic's first choice refused by cublasLtMatmul at run time, for every GEMM),
// every_algorithm (each one the heuristic offers refused at run time), or
// random_epilogues:SEED (each epilogue GEMM's heuristic query refused with probability 1/2).
#include <cublasLt.h>

#include <Eigen/Dense>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "core/half.h"
#include "cuda_runtime_emu.h"

namespace {

struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Desc {
  cublasComputeType_t compute;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
};

// The minimum alignments a preference declares (A, B, C, D), which the algorithms the heuristic
// offers for it assume; an algorithm carries them in its opaque data (after its rank).
struct Preference {
  uint32_t align[4] = {256, 256, 256, 256};
};

// BERT_EMU_LT_REFUSE, read at each call (tests set it around one backend).
std::string refusal() {
  const char* env = std::getenv("BERT_EMU_LT_REFUSE");
  return env ? env : "";
}

bool aligned(const void* p, uint64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename T>
cublasStatus_t set(T& field, const void* buf, size_t bytes) {
  if (buf == nullptr || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, bytes);
  return CUBLAS_STATUS_SUCCESS;
}

size_t element_bytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

float load(const void* base, cudaDataType type, int64_t index) {
  if (type == CUDA_R_32F) return static_cast<const float*>(base)[index];
  const uint16_t bits = static_cast<const uint16_t*>(base)[index];
  return type == CUDA_R_16BF ? bert::bf16_bits_to_float(bits) : bert::fp16_bits_to_float(bits);
}

void store(void* base, cudaDataType type, int64_t index, float v) {
  if (type == CUDA_R_32F) {
    static_cast<float*>(base)[index] = v;
  } else {
    static_cast<uint16_t*>(base)[index] = type == CUDA_R_16BF ? bert::float_to_bf16_bits(v) : bert::float_to_fp16_bits(v);
  }
}

// TF32: fp32 rounded to nearest (ties away) at 10 mantissa bits.
float to_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

bool valid_type(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF || type == CUDA_R_16F;
}

// Element (i, j) of batch b sits at i + j·ld + b·stride; checks the last one is inside memory.
bool inside(const void* base, const Layout& l) {
  if (l.rows == 0 || l.cols == 0) return true;
  const int64_t last = int64_t(l.rows - 1) + int64_t(l.cols - 1) * l.ld + (l.batch - 1) * l.stride;
  const char* p = static_cast<const char*>(base);
  return cuda_emu::inside_allocation(p, p + (last + 1) * element_bytes(l.type) - 1);
}

// op(X) dimensions of a layout.
void op_dims(const Layout& l, int32_t op, uint64_t& rows, uint64_t& cols) {
  rows = op == CUBLAS_OP_N ? l.rows : l.cols;
  cols = op == CUBLAS_OP_N ? l.cols : l.rows;
}

bool shapes_agree(const Desc& d, const Layout& a, const Layout& b, const Layout& c) {
  uint64_t am, ak, bk, bn;
  op_dims(a, d.trans_a, am, ak);
  op_dims(b, d.trans_b, bk, bn);
  const bool epilogue_ok = d.epilogue == CUBLASLT_EPILOGUE_DEFAULT ||
                           ((d.epilogue == CUBLASLT_EPILOGUE_BIAS ||
                             d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) &&
                            c.batch == 1 && d.bias != nullptr &&
                            (d.epilogue == CUBLASLT_EPILOGUE_BIAS ||
                             (d.aux != nullptr && d.aux_ld >= int64_t(c.rows))));
  return am == c.rows && bn == c.cols && ak == bk && a.batch == c.batch && b.batch == c.batch &&
         a.type == b.type && valid_type(a.type) && (c.type == CUDA_R_32F || c.type == a.type) &&
         a.ld >= int64_t(a.rows) && b.ld >= int64_t(b.rows) && c.ld >= int64_t(c.rows) &&
         epilogue_ok;
}

float gelu_tanh(float x) {
  const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = reinterpret_cast<cublasLtHandle_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<int*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type) {
  if (scale_type != CUDA_R_32F ||
      (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc{compute});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<Desc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  Desc& d = *reinterpret_cast<Desc*>(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return set(d.trans_a, buf, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set(d.trans_b, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(d.epilogue, buf, bytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set(d.bias, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set(d.aux, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set(d.aux_ld, buf, bytes);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  Layout& l = *reinterpret_cast<Layout*>(layout);
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set(l.batch, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set(l.stride, buf, bytes);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<Preference*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t bytes) {
  Preference& p = *reinterpret_cast<Preference*>(pref);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return buf != nullptr && bytes == 8 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return set(p.align[0], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return set(p.align[1], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return set(p.align[2], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return set(p.align[3], buf, bytes);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* count) {
  *count = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const Layout& lc = *reinterpret_cast<Layout*>(c);
  const Layout& ld = *reinterpret_cast<Layout*>(d);
  const Desc& dd = *reinterpret_cast<Desc*>(desc);
  if (!shapes_agree(dd, *reinterpret_cast<Layout*>(a), *reinterpret_cast<Layout*>(b), lc) ||
      std::memcmp(&lc, &ld, sizeof(Layout)) != 0)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // Refusals a real cuBLASLt may answer for some shape (tests of LtGemm's fallbacks and errors).
  const std::string refuse = refusal();
  if (refuse == "all" || (refuse == "bias_epilogue" && dd.epilogue == CUBLASLT_EPILOGUE_BIAS))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (refuse.rfind("random_epilogues:", 0) == 0 && dd.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    static std::mt19937_64 random(std::stoull(refuse.substr(refuse.find(':') + 1)));
    if (random() % 2 == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const Preference& p = *reinterpret_cast<Preference*>(pref);
  for (int i = 0; i < requested && i < 3; ++i) {
    results[i] = cublasLtMatmulHeuristicResult_t{};
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].algo.data[0] = static_cast<uint64_t>(i);  // its rank, then the alignments it assumes
    for (int j = 0; j < 4; ++j) results[i].algo.data[1 + j] = p.align[j];
    *count = i + 1;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t a_desc, const void* B,
                              cublasLtMatrixLayout_t b_desc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t c_desc, void* D,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo,
                              void*, size_t, cudaStream_t stream) {
  const Desc& d = *reinterpret_cast<Desc*>(desc);
  const Layout& la = *reinterpret_cast<Layout*>(a_desc);
  const Layout& lb = *reinterpret_cast<Layout*>(b_desc);
  const Layout& lc = *reinterpret_cast<Layout*>(c_desc);
  const Layout& ldd = *reinterpret_cast<Layout*>(d_desc);
  if (algo == nullptr || !shapes_agree(d, la, lb, lc) || std::memcmp(&lc, &ldd, sizeof(Layout)))
    return CUBLAS_STATUS_INVALID_VALUE;
  // The algorithm runs only on pointers as aligned as the preference it was chosen for declared.
  const uint64_t* assumed = algo->data + 1;
  if (!aligned(A, assumed[0]) || !aligned(B, assumed[1]) || !aligned(C, assumed[2]) || !aligned(D, assumed[3]))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const std::string refuse = refusal();
  if ((refuse == "first_algorithm" && algo->data[0] == 0) || refuse == "every_algorithm")
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!cuda_emu::launch_allowed(stream)) return CUBLAS_STATUS_EXECUTION_FAILED;  // another device's stream
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  if (!inside(A, la) || !inside(B, lb) || !inside(D, ldd) || (be != 0.0f && !inside(C, lc)))
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool bias = d.epilogue != CUBLASLT_EPILOGUE_DEFAULT;
  const bool gelu = d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const int64_t m = lc.rows, n = lc.cols;
  const int64_t k = d.trans_a == CUBLAS_OP_N ? la.cols : la.rows;
  const int64_t d_bytes = static_cast<int64_t>(element_bytes(lc.type));  // D, bias and aux
  if (bias && !cuda_emu::inside_allocation(d.bias, static_cast<const char*>(d.bias) + m * d_bytes - 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (gelu && !cuda_emu::inside_allocation(
                  d.aux, static_cast<const char*>(d.aux) + ((m - 1) + (n - 1) * d.aux_ld + 1) * d_bytes - 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  // op(X) of one batch as a dense column-major float matrix (TF32-rounded when asked).
  auto unpack = [tf32](const void* base, const Layout& l, int32_t trans, int64_t batch,
                       int64_t rows, int64_t cols) {
    Eigen::MatrixXf x(rows, cols);
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t index =
            batch * l.stride + (trans == CUBLAS_OP_N ? i + j * l.ld : j + i * l.ld);
        const float v = load(base, l.type, index);
        x(i, j) = tf32 ? to_tf32(v) : v;
      }
    return x;
  };
  // Checked now; computed on the stream (later when it captures): d, la, lb, lc copied.
  cuda_emu::enqueue(stream, [=] {
    // The bytes this call moves: each operand element once, C when beta != 0, D, bias and aux.
    cuda_emu::Traffic& t = cuda_emu::traffic();
    ++t.gemm_launches;
    const int64_t mn = m * n * lc.batch;
    t.read_bytes += m * k * lc.batch * static_cast<int64_t>(element_bytes(la.type)) +
                    k * n * lc.batch * static_cast<int64_t>(element_bytes(lb.type)) +
                    (be != 0.0f ? d_bytes * mn : 0) + (bias ? d_bytes * m : 0);
    t.write_bytes += d_bytes * mn + (gelu ? d_bytes * mn : 0);
    for (int64_t batch = 0; batch < lc.batch; ++batch) {
      const Eigen::MatrixXf product =
          unpack(A, la, d.trans_a, batch, m, k) * unpack(B, lb, d.trans_b, batch, k, n);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          const int64_t at = batch * lc.stride + i + j * lc.ld;
          float v = al * product(i, j);
          if (be != 0.0f) v += be * load(C, lc.type, at);
          if (bias) v += load(d.bias, lc.type, i);
          if (gelu) {
            store(d.aux, lc.type, i + j * d.aux_ld, v);
            v = gelu_tanh(v);
          }
          store(D, lc.type, at, v);
        }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"

extern "C" const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "emulated cuBLASLt error";
}
