// vector_exp/erf/tanh: one loop per instruction set, each compiled for its set (a target
// attribute, which gcc and clang both honour) and calling libmvec's variant of that width (_ZGVeN16v_* for AVX-512, _ZGVdN8v_* for
// AVX2, _ZGVbN4v_* for SSE); the widest the CPU supports is picked on first use. The last
// partial vector goes through a zero-padded buffer (exp, erf and tanh of 0 are harmless).
#include "backend/cpu/cpu_vector_math.h"

#include <immintrin.h>

#include <cstring>

namespace bert {
namespace {

using ArrayFn = void (*)(float*, const float*, int64_t);

// Applies F to n floats W lanes at a time; Load/Store move one vector; TARGET: the ISA.
#define BERT_VECTOR_LOOP(NAME, W, F, LOAD, STORE, TARGET)  \
  TARGET void NAME(float* y, const float* x, int64_t n) { \
    int64_t i = 0;                                        \
    for (; i + (W) <= n; i += (W)) STORE(y + i, F(LOAD(x + i))); \
    if (i < n) {                                          \
      float buf[W] = {};                                  \
      std::memcpy(buf, x + i, (n - i) * sizeof(float));   \
      STORE(buf, F(LOAD(buf)));                           \
      std::memcpy(y + i, buf, (n - i) * sizeof(float));   \
    }                                                     \
  }

extern "C" {
__m128 _ZGVbN4v_expf(__m128);
__m128 _ZGVbN4v_erff(__m128);
__m128 _ZGVbN4v_tanhf(__m128);
}
BERT_VECTOR_LOOP(exp_sse, 4, _ZGVbN4v_expf, _mm_loadu_ps, _mm_storeu_ps, )
BERT_VECTOR_LOOP(erf_sse, 4, _ZGVbN4v_erff, _mm_loadu_ps, _mm_storeu_ps, )
BERT_VECTOR_LOOP(tanh_sse, 4, _ZGVbN4v_tanhf, _mm_loadu_ps, _mm_storeu_ps, )

#define BERT_TARGET_AVX2 __attribute__((target("avx2,fma")))
extern "C" {
BERT_TARGET_AVX2 __m256 _ZGVdN8v_expf(__m256);
BERT_TARGET_AVX2 __m256 _ZGVdN8v_erff(__m256);
BERT_TARGET_AVX2 __m256 _ZGVdN8v_tanhf(__m256);
}
BERT_VECTOR_LOOP(exp_avx2, 8, _ZGVdN8v_expf, _mm256_loadu_ps, _mm256_storeu_ps, BERT_TARGET_AVX2)
BERT_VECTOR_LOOP(erf_avx2, 8, _ZGVdN8v_erff, _mm256_loadu_ps, _mm256_storeu_ps, BERT_TARGET_AVX2)
BERT_VECTOR_LOOP(tanh_avx2, 8, _ZGVdN8v_tanhf, _mm256_loadu_ps, _mm256_storeu_ps, BERT_TARGET_AVX2)

#define BERT_TARGET_AVX512 __attribute__((target("avx512f")))
extern "C" {
BERT_TARGET_AVX512 __m512 _ZGVeN16v_expf(__m512);
BERT_TARGET_AVX512 __m512 _ZGVeN16v_erff(__m512);
BERT_TARGET_AVX512 __m512 _ZGVeN16v_tanhf(__m512);
}
BERT_VECTOR_LOOP(exp_avx512, 16, _ZGVeN16v_expf, _mm512_loadu_ps, _mm512_storeu_ps, BERT_TARGET_AVX512)
BERT_VECTOR_LOOP(erf_avx512, 16, _ZGVeN16v_erff, _mm512_loadu_ps, _mm512_storeu_ps, BERT_TARGET_AVX512)
BERT_VECTOR_LOOP(tanh_avx512, 16, _ZGVeN16v_tanhf, _mm512_loadu_ps, _mm512_storeu_ps, BERT_TARGET_AVX512)

#undef BERT_VECTOR_LOOP
#undef BERT_TARGET_AVX2
#undef BERT_TARGET_AVX512

enum class Isa { sse, avx2, avx512 };

Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
  return Isa::sse;
}

Isa isa() {
  static const Isa chosen = detect();
  return chosen;
}

ArrayFn pick(ArrayFn sse, ArrayFn avx2, ArrayFn avx512) {
  switch (isa()) {
    case Isa::avx512: return avx512;
    case Isa::avx2: return avx2;
    case Isa::sse: break;
  }
  return sse;
}

}  // namespace

void vector_exp(float* y, const float* x, int64_t n) {
  static const ArrayFn f = pick(exp_sse, exp_avx2, exp_avx512);
  f(y, x, n);
}

void vector_erf(float* y, const float* x, int64_t n) {
  static const ArrayFn f = pick(erf_sse, erf_avx2, erf_avx512);
  f(y, x, n);
}

void vector_tanh(float* y, const float* x, int64_t n) {
  static const ArrayFn f = pick(tanh_sse, tanh_avx2, tanh_avx512);
  f(y, x, n);
}

const char* vector_math_isa() {
  switch (isa()) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::sse: break;
  }
  return "sse";
}

}  // namespace bert
