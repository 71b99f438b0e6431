// CRC-32C: the SSE4.2 crc32 instruction where the CPU has it (8 bytes per instruction, so that
// verifying a multi-gigabyte checkpoint costs well under a second), else byte-at-a-time with a
// 256-entry table of the reflected polynomial 0x82F63B78. Both give the same value.
#include "core/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace bert {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

// Both take and return the inverted register (~crc).
uint32_t extend_table(uint32_t c, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t c, const unsigned char* p, size_t n) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
  }
  c = static_cast<uint32_t>(c64);
  for (; n > 0; --n) c = _mm_crc32_u8(c, *p++);
  return c;
}

const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  if (kHaveSse42) return ~extend_sse42(~crc, p, n);
#endif
  return ~extend_table(~crc, p, n);
}

namespace {

// Multiplication in GF(2) of a 32x32 bit matrix (32 columns) by a vector, and of two matrices.
uint32_t gf2_times(const uint32_t* matrix, uint32_t vector) {
  uint32_t sum = 0;
  for (int i = 0; vector; ++i, vector >>= 1) {
    if (vector & 1) sum ^= matrix[i];
  }
  return sum;
}

void gf2_square(uint32_t* square, const uint32_t* matrix) {
  for (int i = 0; i < 32; ++i) square[i] = gf2_times(matrix, matrix[i]);
}

}  // namespace

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  if (length_b == 0) return crc_a;
  // odd: the operator that appends one zero bit to the CRC register; even: two bits.
  uint32_t odd[32], even[32];
  odd[0] = 0x82F63B78u;
  for (int i = 1; i < 32; ++i) odd[i] = 1u << (i - 1);
  gf2_square(even, odd);  // two zero bits
  gf2_square(odd, even);  // four
  // Append length_b zero bytes to crc_a, squaring the operator for each bit of the length.
  do {
    gf2_square(even, odd);
    if (length_b & 1) crc_a = gf2_times(even, crc_a);
    length_b >>= 1;
    if (length_b == 0) break;
    gf2_square(odd, even);
    if (length_b & 1) crc_a = gf2_times(odd, crc_a);
    length_b >>= 1;
  } while (length_b != 0);
  return crc_a ^ crc_b;
}

uint32_t crc32c_portable(uint32_t crc, const void* data, size_t n) {
  return ~extend_table(~crc, static_cast<const unsigned char*>(data), n);
}

}  // namespace bert
