#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecord files use,
// computed with a 256-entry table: a few KB per second of event records need no hardware
// CRC instruction. mask_crc32c is TFRecord's rotation + constant, which keeps a CRC of
// data that itself contains CRCs from being trivially zero.
#include <cstddef>
#include <cstdint>

namespace mirrored::io {

uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);  // crc: value to extend
uint32_t mask_crc32c(uint32_t crc);

}  // namespace mirrored::io
