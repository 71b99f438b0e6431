// cpu_gemm through dnnl_sgemm, cpu_gemm_bf16 through dnnl_gemm_bf16bf16f32, and the fp32 -> bf16
// conversion of their operands. oneDNN sizes its
// OpenMP team by omp_get_max_threads(), so each call sets the calling thread's team size for its
// duration and puts the host's back after: the host's own OpenMP settings are left as they were.
#include "backend/cpu/cpu_gemm.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <cstring>

#include "backend/cpu/cpu_isa.h"
#include "core/error.h"

// oneDNN exports its bf16 GEMM (the sgemm interface with bf16 inputs) without declaring it in
// its public headers; bfloat16_t there is a 16-bit struct, passed here as its bits.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                                               float alpha, const uint16_t* A, dnnl_dim_t lda, const uint16_t* B,
                                               dnnl_dim_t ldb, float beta, float* C, dnnl_dim_t ldc);

namespace bert {
namespace {

class ScopedTeamSize {
 public:
  explicit ScopedTeamSize(int threads) : previous_(omp_get_max_threads()) {
    if (threads != previous_) omp_set_num_threads(threads);
  }
  ~ScopedTeamSize() {
    if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
  }
  ScopedTeamSize(const ScopedTeamSize&) = delete;
  ScopedTeamSize& operator=(const ScopedTeamSize&) = delete;

 private:
  int previous_;
};

// Inside a parallel region oneDNN runs on the calling thread; its team size is not ours to set.
int team_size(int threads) { return omp_in_parallel() ? omp_get_max_threads() : threads; }

void check(dnnl_status_t status, const char* what, int64_t M, int64_t N, int64_t K) {
  BERT_CHECK(status == dnnl_success, Code::internal, what, ": oneDNN failed (status ", static_cast<int>(status),
             ") for M=", M, " N=", N, " K=", K);
}

}  // namespace

void cpu_gemm(int64_t M, int64_t N, int64_t K, float alpha, GemmOperand<float> A, GemmOperand<float> B,
              float beta, float* C, int64_t ldc, int threads) {
  if (M == 0 || N == 0) return;
  ScopedTeamSize team(team_size(threads));
  check(dnnl_sgemm(A.transposed ? 'T' : 'N', B.transposed ? 'T' : 'N', M, N, K, alpha, A.data, A.ld, B.data, B.ld,
                   beta, C, ldc),
        "cpu_gemm", M, N, K);
}

void cpu_gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, GemmOperand<uint16_t> A,
                   GemmOperand<uint16_t> B, float beta, float* C, int64_t ldc, int threads) {
  if (M == 0 || N == 0) return;
  ScopedTeamSize team(team_size(threads));
  check(dnnl_gemm_bf16bf16f32(A.transposed ? 'T' : 'N', B.transposed ? 'T' : 'N', M, N, K, alpha, A.data, A.ld,
                              B.data, B.ld, beta, C, ldc),
        "cpu_gemm_bf16", M, N, K);
}

// Branch-free, so that each clone vectorises it: the rounding of core/half.h, and NaN's payload
// kept with the quiet bit set.
BERT_CPU_CLONES
void floats_to_bf16(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, sizeof u);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    dst[i] = static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
  }
}

bool cpu_has_native_bf16() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

std::string cpu_isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "SSE4.1";
    case dnnl_cpu_isa_avx: return "AVX";
    case dnnl_cpu_isa_avx2: return "AVX2";
    case dnnl_cpu_isa_avx2_vnni: return "AVX2 VNNI";
    case dnnl_cpu_isa_avx512_mic: return "AVX-512 (Xeon Phi)";
    case dnnl_cpu_isa_avx512_mic_4ops: return "AVX-512 (Xeon Phi 4ops)";
    case dnnl_cpu_isa_avx512_core: return "AVX-512";
    case dnnl_cpu_isa_avx512_core_vnni: return "AVX-512 VNNI";
    case dnnl_cpu_isa_avx512_core_bf16: return "AVX-512 BF16";
    case dnnl_cpu_isa_avx512_core_amx: return "AMX";
    default: return "ISA " + std::to_string(static_cast<unsigned>(dnnl_get_effective_cpu_isa()));
  }
}

}  // namespace bert
