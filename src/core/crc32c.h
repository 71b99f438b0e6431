// CRC-32C (Castagnoli polynomial, as in iSCSI/SSE4.2) and the "masked" form that LevelDB tables,
// TensorFlow tensor bundles and TFRecord files store: rotate right by 15 and add 0xa282ead8.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bert {

// CRC-32C of `n` bytes, continuing from `crc` (0 for a fresh checksum).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }
// The CRC-32C of A followed by B from crc(A), crc(B) and B's length, without B's bytes (zlib's
// crc32_combine method over the Castagnoli polynomial): what a checksum of a whole file is made
// of when parts of it were checksummed where they came from.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);
// The table-driven form that crc32c_extend falls back to without SSE4.2 (same values).
uint32_t crc32c_portable(uint32_t crc, const void* data, size_t n);

inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace bert
