// The packed forward product: W is copied once into blocks of kBlockK rows of k, each cut into
// panels of 48 columns stored k by k. For each k-block, every thread packs X's rows into
// micro-panels of 8 (zero rows past M) and runs an 8 x 48 AVX-512 kernel (24 accumulators) over
// its own range of panels, each panel against all of X's micro-panels while it prefetches the
// next panel into L2, a share per micro-panel. The packed copy sits on transparent huge pages
// where the system grants them (madvise on this copy only): they saved another 5%.
#include "backend/cpu/cpu_packed_gemm.h"

#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace bert {
namespace {

constexpr int64_t kRows = 8, kPanel = 48, kBlockK = 512;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr int64_t kLineFloats = 16;  // one 64-byte cache line

// Lanes [16·v, 16·v + 16) of a panel of `width` columns.
__mmask16 lanes(int64_t width, int v) {
  const int64_t n = std::clamp<int64_t>(width - 16 * v, 0, 16);
  return static_cast<__mmask16>((1u << n) - 1u);
}

// C[R, 48] (=|+=) a[kc][8]·b[kc][48] over the first R rows of a, then + bias when not null.
// Every 4th k prefetches one line of `next` (next_lines lines in all) into L2.
template <int R>
__attribute__((target("avx512f"))) void micro_kernel(int64_t kc, const float* a, const float* b, float* c,
                                                     int64_t ldc, const __mmask16 (&mask)[3], bool accumulate,
                                                     const float* bias, const char* next, int64_t next_lines) {
  __m512 acc[R][3];
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = acc[i][2] = _mm512_setzero_ps();
  int64_t line = 0;
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), b2 = _mm512_loadu_ps(b + 32);
    if ((k & 3) == 0 && line < next_lines) _mm_prefetch(next + 64 * line++, _MM_HINT_T1);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(ai, b2, acc[i][2]);
    }
    a += kRows;
    b += kPanel;
  }
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    for (int v = 0; v < 3; ++v) {
      __m512 x = acc[i][v];
      if (accumulate) x = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], row + 16 * v), x);
      if (bias != nullptr) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], bias + 16 * v));
      _mm512_mask_storeu_ps(row + 16 * v, mask[v], x);
    }
  }
}

using MicroKernel = void (*)(int64_t, const float*, const float*, float*, int64_t, const __mmask16 (&)[3], bool,
                             const float*, const char*, int64_t);
constexpr MicroKernel kKernels[kRows] = {micro_kernel<1>, micro_kernel<2>, micro_kernel<3>, micro_kernel<4>,
                                         micro_kernel<5>, micro_kernel<6>, micro_kernel<7>, micro_kernel<8>};

// dst[rp][k][i] = X[8·rp + i][k0 + k] for rows below M, 0 past them.
void pack_rows(const float* X, int64_t ldx, int64_t M, int64_t k0, int64_t kc, float* dst) {
  for (int64_t r0 = 0; r0 < M; r0 += kRows, dst += kRows * kc) {
    for (int64_t i = 0; i < kRows; ++i) {
      if (r0 + i < M) {
        const float* row = X + (r0 + i) * ldx + k0;
        for (int64_t k = 0; k < kc; ++k) dst[k * kRows + i] = row[k];
      } else {
        for (int64_t k = 0; k < kc; ++k) dst[k * kRows + i] = 0.0f;
      }
    }
  }
}

}  // namespace

bool packed_gemm_supported() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

PackedWeight::PackedWeight(const float* W, int64_t N, int64_t K, int threads)
    : N_(N), K_(K), panels_((N + kPanel - 1) / kPanel) {
  // Copies of at least a huge page are aligned to one and advised onto them; smaller ones to a line.
  const size_t used = static_cast<size_t>(panels_ * kPanel * K) * sizeof(float);
  const size_t align = used >= kHugePage ? kHugePage : 64;
  bytes_ = (used + align - 1) / align * align;
  data_ = static_cast<float*>(std::aligned_alloc(align, bytes_));
  BERT_CHECK(data_ != nullptr, Code::out_of_memory, "cpu backend: cannot allocate ", bytes_,
             " bytes for a packed weight matrix");
  if (align == kHugePage) madvise(data_, bytes_, MADV_HUGEPAGE);  // advice: without it, 5% slower
  const int64_t blocks = (K + kBlockK - 1) / kBlockK;
#pragma omp parallel for collapse(2) num_threads(threads) if (!omp_in_parallel())
  for (int64_t kb = 0; kb < blocks; ++kb) {
    for (int64_t p = 0; p < panels_; ++p) {
      const int64_t k0 = kb * kBlockK, kc = std::min(kBlockK, K - k0);
      float* dst = const_cast<float*>(panel(k0, p));
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t n = p * kPanel + j;
        if (n < N) {
          for (int64_t k = 0; k < kc; ++k) dst[k * kPanel + j] = W[n * K + k0 + k];
        } else {
          for (int64_t k = 0; k < kc; ++k) dst[k * kPanel + j] = 0.0f;
        }
      }
    }
  }
}

PackedWeight::~PackedWeight() { std::free(data_); }

const float* PackedWeight::panel(int64_t k0, int64_t p) const {
  return data_ + k0 * panels_ * kPanel + p * std::min(kBlockK, K_ - k0) * kPanel;
}

size_t PackedWeight::scratch_floats(int64_t M, int threads) {
  return static_cast<size_t>(std::max(threads, 1)) * static_cast<size_t>((M + kRows - 1) / kRows * kRows * kBlockK);
}

void PackedWeight::multiply(int64_t M, const float* X, int64_t ldx, const float* bias, float* C, int64_t ldc,
                            int threads, float* scratch) const {
  if (M == 0) return;
  const int64_t row_panels = (M + kRows - 1) / kRows;
  const int team = omp_in_parallel() ? 1 : static_cast<int>(std::clamp<int64_t>(threads, 1, panels_));
#pragma omp parallel num_threads(team)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t p_begin = panels_ * t / nt, p_end = panels_ * (t + 1) / nt;
    float* a = scratch + t * row_panels * kRows * kBlockK;
    for (int64_t k0 = 0; k0 < K_; k0 += kBlockK) {
      const int64_t kc = std::min(kBlockK, K_ - k0);
      pack_rows(X, ldx, M, k0, kc, a);
      const bool last_block = k0 + kc == K_;
      for (int64_t p = p_begin; p < p_end; ++p) {
        // The panel after this one in this thread's order, prefetched a share per micro-panel.
        const char* next = nullptr;
        int64_t next_floats = 0;
        if (p + 1 < p_end) {
          next = reinterpret_cast<const char*>(panel(k0, p + 1)), next_floats = kc * kPanel;
        } else if (!last_block) {
          next = reinterpret_cast<const char*>(panel(k0 + kc, p_begin));
          next_floats = std::min(kBlockK, K_ - k0 - kc) * kPanel;
        }
        const int64_t share = (next_floats / kLineFloats + row_panels - 1) / row_panels;  // lines
        const int64_t width = std::min(kPanel, N_ - p * kPanel);
        const __mmask16 mask[3] = {lanes(width, 0), lanes(width, 1), lanes(width, 2)};
        const float* panel_bias = last_block && bias != nullptr ? bias + p * kPanel : nullptr;
        for (int64_t rp = 0; rp < row_panels; ++rp) {
          const int64_t rows = std::min(kRows, M - rp * kRows);
          const int64_t lines = std::clamp<int64_t>(next_floats / kLineFloats - rp * share, 0, share);
          kKernels[rows - 1](kc, a + rp * kRows * kc, panel(k0, p), C + rp * kRows * ldc + p * kPanel, ldc, mask,
                             k0 > 0, panel_bias, next == nullptr ? nullptr : next + rp * share * 64, lines);
        }
      }
    }
  }
}

}  // namespace bert
