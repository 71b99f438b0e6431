// Host conversions between fp32 and the 16-bit wire formats (bf16, IEEE fp16), both rounding
// to nearest even. Used where gradients travel in low precision over MPI; the GPU path has its
// own kernels (kernels/cast.cu).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace bert {

#if defined(__clang__) && __clang_major__ < 15
using HalfStorage = __fp16;  // clang < 15 (the fuzz build) lacks _Float16 on x86; compiler-rt converts
#else
using HalfStorage = _Float16;
#endif

inline uint16_t float_to_bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40);  // stays a (quiet) NaN
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

inline uint16_t float_to_fp16_bits(float x) {
  const HalfStorage h = static_cast<HalfStorage>(x);
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}

inline float fp16_bits_to_float(uint16_t b) {
  HalfStorage h;
  std::memcpy(&h, &b, sizeof h);
  return static_cast<float>(h);
}

}  // namespace bert
