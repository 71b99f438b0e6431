// vector_exp/erf/tanh: one loop per instruction set, each compiled for its set (a target
// attribute, which gcc and clang both honour) and calling libmvec's variant of that width (_ZGVeN16v_* for AVX-512, _ZGVdN8v_* for
// AVX2, _ZGVbN4v_* for SSE); the widest the CPU supports is picked on first use. The last
// partial vector goes through a zero-padded buffer (exp, erf and tanh of 0 are harmless).
// exp's lanes below kExpZeroBelow, where expf is exactly 0, are set to 0 without libmvec: it
// takes a scalar path for every lane whose result is not a normal float, 5-9 ns a lane against
// 0.3 on an AMD EPYC Zen 4, and a softmax over masked keys (-10000) has many such lanes.
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

// expf(x) rounds to 0 below this (e^-104 is under half the smallest subnormal float).
constexpr float kExpZeroBelow = -104.0f;

extern "C" {
__m128 _ZGVbN4v_expf(__m128);
__m128 _ZGVbN4v_erff(__m128);
__m128 _ZGVbN4v_tanhf(__m128);
}
__m128 expf_sse(__m128 x) {
  const __m128 zero = _mm_cmplt_ps(x, _mm_set1_ps(kExpZeroBelow));
  return _mm_andnot_ps(zero, _ZGVbN4v_expf(_mm_andnot_ps(zero, x)));
}
BERT_VECTOR_LOOP(exp_sse, 4, expf_sse, _mm_loadu_ps, _mm_storeu_ps, )
BERT_VECTOR_LOOP(erf_sse, 4, _ZGVbN4v_erff, _mm_loadu_ps, _mm_storeu_ps, )
BERT_VECTOR_LOOP(tanh_sse, 4, _ZGVbN4v_tanhf, _mm_loadu_ps, _mm_storeu_ps, )

#define BERT_TARGET_AVX2 __attribute__((target("avx2,fma")))
extern "C" {
BERT_TARGET_AVX2 __m256 _ZGVdN8v_expf(__m256);
BERT_TARGET_AVX2 __m256 _ZGVdN8v_erff(__m256);
BERT_TARGET_AVX2 __m256 _ZGVdN8v_tanhf(__m256);
}
BERT_TARGET_AVX2 __m256 expf_avx2(__m256 x) {
  const __m256 zero = _mm256_cmp_ps(x, _mm256_set1_ps(kExpZeroBelow), _CMP_LT_OQ);
  return _mm256_andnot_ps(zero, _ZGVdN8v_expf(_mm256_andnot_ps(zero, x)));
}
BERT_VECTOR_LOOP(exp_avx2, 8, expf_avx2, _mm256_loadu_ps, _mm256_storeu_ps, BERT_TARGET_AVX2)
BERT_VECTOR_LOOP(erf_avx2, 8, _ZGVdN8v_erff, _mm256_loadu_ps, _mm256_storeu_ps, BERT_TARGET_AVX2)
BERT_VECTOR_LOOP(tanh_avx2, 8, _ZGVdN8v_tanhf, _mm256_loadu_ps, _mm256_storeu_ps, BERT_TARGET_AVX2)

#define BERT_TARGET_AVX512 __attribute__((target("avx512f")))
extern "C" {
BERT_TARGET_AVX512 __m512 _ZGVeN16v_expf(__m512);
BERT_TARGET_AVX512 __m512 _ZGVeN16v_erff(__m512);
BERT_TARGET_AVX512 __m512 _ZGVeN16v_tanhf(__m512);
}
BERT_TARGET_AVX512 __m512 expf_avx512(__m512 x) {
  const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpZeroBelow), _CMP_LT_OQ);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~zero),
                             _ZGVeN16v_expf(_mm512_maskz_mov_ps(static_cast<__mmask16>(~zero), x)));
}
BERT_VECTOR_LOOP(exp_avx512, 16, expf_avx512, _mm512_loadu_ps, _mm512_storeu_ps, BERT_TARGET_AVX512)
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
