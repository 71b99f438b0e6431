// Elementwise exp, erf and tanh over float arrays, vectorised for the CPU the program runs on:
// AVX-512, AVX2 or SSE, chosen once at run time (no -march flags needed), through glibc's
// vector math library libmvec (results within its documented 4 ulp; each element's value does
// not depend on its neighbours or position, so results are independent of blocking and threads).
// y may equal x.
#pragma once

#include <cstdint>

namespace bert {

void vector_exp(float* y, const float* x, int64_t n);
void vector_erf(float* y, const float* x, int64_t n);
void vector_tanh(float* y, const float* x, int64_t n);

// "avx512", "avx2" or "sse": the instruction set the functions above use on this CPU.
const char* vector_math_isa();

}  // namespace bert
