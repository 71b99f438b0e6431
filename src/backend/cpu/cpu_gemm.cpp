// cpu_gemm through dnnl_sgemm (the forward product on several threads as column slices, one
// single-threaded call each), cpu_gemm_bf16 through dnnl_gemm_bf16bf16f32, and the fp32 -> bf16
// conversion of their operands. oneDNN sizes its OpenMP team by omp_get_max_threads(), so each
// call sets the calling thread's team size for its duration and puts the host's back after: the
// host's own OpenMP settings are left as they were.
#include "backend/cpu/cpu_gemm.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_isa.h"
#include "core/error.h"

// oneDNN exports its bf16 GEMM (the sgemm interface with bf16 inputs) without declaring it in
// its public headers; bfloat16_t there is a 16-bit struct, passed here as its bits.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                                               float alpha, const uint16_t* A, dnnl_dim_t lda, const uint16_t* B,
                                               dnnl_dim_t ldb, float beta, float* C, dnnl_dim_t ldc);

namespace bert {

ScopedTeamSize::ScopedTeamSize(int threads) : previous_(omp_get_max_threads()) {
  if (threads != previous_) omp_set_num_threads(threads);
}

ScopedTeamSize::~ScopedTeamSize() {
  if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
}

namespace {

// Inside a parallel region oneDNN runs on the calling thread; its team size is not ours to set.
int team_size(int threads) { return omp_in_parallel() ? omp_get_max_threads() : threads; }

// The forward product Y = X·Wᵀ on T > 1 threads runs as T single-threaded calls, each on a slice
// of C's columns of at least kMinSliceColumns (a multiple of 16 floats, one cache line of C's
// rows). oneDNN's own split of these shapes splits the reduction for some (then the bits depend
// on the thread count) and runs slowly there: bert-large's forward GEMMs on 512 tokens, 2 threads
// of an Intel Xeon w/ AMX, 221-234 GFLOP/s in oneDNN, 280-292 in column slices. The bits depend
// on the thread count as before: oneDNN's AVX-512 kernels give a column the same bits in any
// slice at least 128 wide, its AVX2 ones block the reduction by the slice's width.
constexpr int64_t kMinSliceColumns = 128;
constexpr int64_t kSliceQuantum = 16;

// Each of T column slices of N: ceil(N / T) rounded up to kSliceQuantum.
int64_t slice_width(int64_t N, int64_t T) {
  return ((N + T - 1) / T + kSliceQuantum - 1) / kSliceQuantum * kSliceQuantum;
}

// The number of column slices of an N-column product for `team` threads: at most `team`, each,
// the last included, at least kMinSliceColumns wide (1: no split).
int column_slices(int64_t N, int team) {
  for (int64_t T = std::min<int64_t>(team, N / kMinSliceColumns); T > 1; --T) {
    const int64_t slice = slice_width(N, T);
    if (N - (T - 1) * slice >= kMinSliceColumns) return static_cast<int>(T);
  }
  return 1;
}

// oneDNN's name for op(X).
char op_of(bool transposed) { return transposed ? 'T' : 'N'; }

// op(B)'s columns [n0, ...): B stored [K, N] starts n0 floats later, stored transposed n0 rows later.
template <typename T>
GemmOperand<T> columns_from(GemmOperand<T> B, int64_t n0) {
  return {B.data + (B.transposed ? n0 * B.ld : n0), B.ld, B.transposed};
}

void check(dnnl_status_t status, const char* what, int64_t M, int64_t N, int64_t K) {
  BERT_CHECK(status == dnnl_success, Code::internal, what, ": oneDNN failed (status ", static_cast<int>(status),
             ") for M=", M, " N=", N, " K=", K);
}

}  // namespace

void cpu_gemm(int64_t M, int64_t N, int64_t K, float alpha, GemmOperand<float> A, GemmOperand<float> B,
              float beta, float* C, int64_t ldc, int threads) {
  if (M == 0 || N == 0) return;
  const int slices = !omp_in_parallel() && !A.transposed && B.transposed ? column_slices(N, threads) : 1;
  if (slices > 1) {
    const int64_t width = slice_width(N, slices);
    int failed = 0;  // the largest status (dnnl_success is 0)
#pragma omp parallel num_threads(slices) reduction(max : failed)
    for (int s = omp_get_thread_num(); s < slices; s += omp_get_num_threads()) {  // fewer threads: more slices each
      const int64_t n0 = s * width, n = std::min(width, N - n0);
      const GemmOperand<float> slice = columns_from(B, n0);
      failed = std::max<int>(failed, dnnl_sgemm('N', 'T', M, n, K, alpha, A.data, A.ld, slice.data, slice.ld, beta,
                                                C + n0, ldc));
    }
    return check(static_cast<dnnl_status_t>(failed), "cpu_gemm", M, N, K);
  }
  ScopedTeamSize team(team_size(threads));
  check(dnnl_sgemm(op_of(A.transposed), op_of(B.transposed), M, N, K, alpha, A.data, A.ld, B.data, B.ld, beta, C,
                   ldc),
        "cpu_gemm", M, N, K);
}

namespace {

// Both products in column slices, each slice one single-threaded call of `gemm` (a oneDNN call
// inside the parallel region runs on the calling thread); its statuses are checked after the
// region, so no exception leaves it. With an even team each product gets half the threads' worth
// of slices; with an odd one as many slices as threads, two per thread. On one thread (or inside
// a parallel region) the two run whole, one after the other.
template <typename T, typename Gemm>
void gemm_pair(const GemmCall<T>& first, const GemmCall<T>& second, int threads, Gemm gemm, const char* what) {
  const GemmCall<T>* calls[2] = {&first, &second};
  const int team = omp_in_parallel() ? 1 : threads;
  int slices[2], width[2];
  for (int c = 0; c < 2; ++c) {
    slices[c] = team < 2 ? 1 : column_slices(calls[c]->N, team % 2 == 0 ? team / 2 : team);
    width[c] = static_cast<int>(slice_width(calls[c]->N, slices[c]));
  }
  const int tasks = slices[0] + slices[1];
  int failed_first = 0, failed_second = 0;  // the largest status of each (dnnl_success is 0)
  {
    ScopedTeamSize one(team_size(1));
#pragma omp parallel for schedule(static) num_threads(std::min(team, tasks)) if (team > 1) \
    reduction(max : failed_first, failed_second)
    for (int task = 0; task < tasks; ++task) {
      const int c = task < slices[0] ? 0 : 1, s = c == 0 ? task : task - slices[0];
      const GemmCall<T>& g = *calls[c];
      const int64_t n0 = int64_t{s} * width[c], n = std::min<int64_t>(width[c], g.N - n0);
      int& failed = c == 0 ? failed_first : failed_second;
      failed = std::max(failed, gemm(g.M, n, g.K, g.A, columns_from(g.B, n0), g.beta, g.C + n0, g.ldc));
    }
  }
  check(static_cast<dnnl_status_t>(failed_first), what, first.M, first.N, first.K);
  check(static_cast<dnnl_status_t>(failed_second), what, second.M, second.N, second.K);
}

}  // namespace

void cpu_gemm_pair(const GemmCall<float>& first, const GemmCall<float>& second, int threads) {
  gemm_pair(first, second, threads,
            [](int64_t M, int64_t N, int64_t K, GemmOperand<float> A, GemmOperand<float> B, float beta, float* C,
               int64_t ldc) {
              return static_cast<int>(dnnl_sgemm(op_of(A.transposed), op_of(B.transposed), M, N, K, 1.0f, A.data,
                                                 A.ld, B.data, B.ld, beta, C, ldc));
            },
            "cpu_gemm_pair");
}

void cpu_gemm_pair_bf16(const GemmCall<uint16_t>& first, const GemmCall<uint16_t>& second, int threads) {
  gemm_pair(first, second, threads,
            [](int64_t M, int64_t N, int64_t K, GemmOperand<uint16_t> A, GemmOperand<uint16_t> B, float beta,
               float* C, int64_t ldc) {
              return static_cast<int>(dnnl_gemm_bf16bf16f32(op_of(A.transposed), op_of(B.transposed), M, N, K, 1.0f,
                                                            A.data, A.ld, B.data, B.ld, beta, C, ldc));
            },
            "cpu_gemm_pair_bf16");
}

void cpu_gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, GemmOperand<uint16_t> A,
                   GemmOperand<uint16_t> B, float beta, float* C, int64_t ldc, int threads) {
  if (M == 0 || N == 0) return;
  ScopedTeamSize team(team_size(threads));
  check(dnnl_gemm_bf16bf16f32(op_of(A.transposed), op_of(B.transposed), M, N, K, alpha, A.data, A.ld,
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
