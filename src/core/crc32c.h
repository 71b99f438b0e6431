// CRC-32C (Castagnoli polynomial, as in iSCSI/SSE4.2) and the "masked" form that LevelDB tables,
// TensorFlow tensor bundles and TFRecord files store: rotate right by 15 and add 0xa282ead8.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bert {

// CRC-32C of `n` bytes, continuing from `crc` (0 for a fresh checksum).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }
// The table-driven form that crc32c_extend falls back to without SSE4.2 (same values).
uint32_t crc32c_portable(uint32_t crc, const void* data, size_t n);

inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace bert
