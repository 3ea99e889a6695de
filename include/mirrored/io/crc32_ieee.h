#pragma once
// CRC-32 of the IEEE 802.3 polynomial (reflected 0xEDB88320): exactly zlib's crc32, the
// checksum the checkpoint file stores (io/checkpoint_file.h). zlib's table method was about
// a quarter of the writer's samples in a profile of a checkpoint after every step; folding
// with carry-less multiplies (PCLMULQDQ, 16 bytes a step, or VPCLMULQDQ on AVX-512, 64)
// gives the same value 4-5x faster (10 MB in cache: 2.15 ms for zlib, 0.47 and 0.39 ms).
// The implementation is chosen once, at run time, from what the CPU has; the default
// compiler flags stay what they are (the SIMD functions carry their own target
// attributes), and any other CPU gets zlib's.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mirrored::io {

// crc: the CRC of the bytes before `data` (0 to start), as zlib's crc32(crc, data, size);
// an empty range returns crc as it is, even with a null `data` (where zlib returns 0).
uint32_t crc32_ieee(const void* data, size_t size, uint32_t crc = 0);

// The CRC of A followed by B from crc_a = crc32_ieee(A) and crc_b = crc32_ieee(B) of
// size_b bytes (zlib's crc32_combine64): a CRC computed elsewhere, on the way, joins a chain.
uint32_t crc32_ieee_combine(uint32_t crc_a, uint32_t crc_b, size_t size_b);

// The implementations, fastest last. Each gives the same value; the tests check every one
// this CPU can run.
enum class Crc32Method {
  kZlib,           // zlib's crc32_z
  kPclmul,         // 4 x 128-bit folds with PCLMULQDQ, zlib for the last < 16 bytes
  kVpclmulAvx512,  // 4 x 512-bit folds with VPCLMULQDQ, then kPclmul's steps
};

bool crc32_method_supported(Crc32Method method);  // on this CPU
Crc32Method crc32_method_in_use();                 // the fastest supported: crc32_ieee's
std::string_view crc32_method_name(Crc32Method method);
// crc32_ieee through `method`, which must be supported.
uint32_t crc32_ieee_with(Crc32Method method, const void* data, size_t size, uint32_t crc = 0);

}  // namespace mirrored::io
