#include "mirrored/io/crc32_ieee.h"

#include <zlib.h>

#include "mirrored/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MIRRORED_CRC32_FOLDING 1
#endif

namespace mirrored::io {
namespace {

// The folds keep the CRC register inverted (zlib's convention inside crc32): these take and
// return that form, so zlib can finish the tail from where they stop.
uint32_t zlib_crc_tail(uint32_t inverted, const unsigned char* bytes, size_t size) {
  return ~static_cast<uint32_t>(crc32_z(~inverted, bytes, size));
}

#ifdef MIRRORED_CRC32_FOLDING
// Folding constants of the bit-reflected polynomial, as in Intel's "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ" (Gopal et al., 2009) and zlib-ng/Chromium's zlib:
// a pair (x^(d+32) mod P, x^(d-32) mod P), reflected and shifted left by one, folds a
// 128-bit lane d bits forward.
alignas(16) constexpr uint64_t kCrcFold128[2] = {0x01751997d0, 0x00ccaa009e};    // d = 128
alignas(16) constexpr uint64_t kCrcFold512[2] = {0x0154442bd4, 0x01c6e41596};    // d = 512
alignas(16) constexpr uint64_t kCrcFold2048[2] = {0x011542778a, 0x01322d1430};   // d = 2048
alignas(16) constexpr uint64_t kCrcFold64To32[2] = {0x0163cd6124, 0};            // x^64 mod P
alignas(16) constexpr uint64_t kCrcBarrett[2] = {0x01db710641, 0x01f7011641};   // P', mu

inline __m128i crc_load_lane(const unsigned char* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); }

__attribute__((target("pclmul,sse4.1"))) inline __m128i crc_fold_lane(__m128i lane, __m128i next, __m128i k) {
  const __m128i low = _mm_clmulepi64_si128(lane, k, 0x00);
  const __m128i high = _mm_clmulepi64_si128(lane, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(high, low), next);
}

// The last 128 bits of the folded message to the 32-bit (inverted) CRC: fold to 64 bits,
// then Barrett reduction.
__attribute__((target("pclmul,sse4.1"))) inline uint32_t crc_reduce_lane(__m128i x) {
  const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
  x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, _mm_load_si128(reinterpret_cast<const __m128i*>(kCrcFold128)), 0x10));
  const __m128i k64 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kCrcFold64To32));
  x = _mm_xor_si128(_mm_srli_si128(x, 4), _mm_clmulepi64_si128(_mm_and_si128(x, low32), k64, 0x00));
  const __m128i barrett = _mm_load_si128(reinterpret_cast<const __m128i*>(kCrcBarrett));
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), barrett, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, t), 1));
}

// size >= 64 and a multiple of 16: four lanes folded 64 bytes at a time, then one.
__attribute__((target("pclmul,sse4.1"))) uint32_t crc_fold_pclmul(const unsigned char* p, size_t size,
                                                                    uint32_t inverted) {
  __m128i x0 = _mm_xor_si128(crc_load_lane(p), _mm_cvtsi32_si128(static_cast<int>(inverted)));
  __m128i x1 = crc_load_lane(p + 16), x2 = crc_load_lane(p + 32), x3 = crc_load_lane(p + 48);
  p += 64;
  size -= 64;
  const __m128i k512 = _mm_load_si128(reinterpret_cast<const __m128i*>(kCrcFold512));
  for (; size >= 64; p += 64, size -= 64) {
    x0 = crc_fold_lane(x0, crc_load_lane(p), k512);
    x1 = crc_fold_lane(x1, crc_load_lane(p + 16), k512);
    x2 = crc_fold_lane(x2, crc_load_lane(p + 32), k512);
    x3 = crc_fold_lane(x3, crc_load_lane(p + 48), k512);
  }
  const __m128i k128 = _mm_load_si128(reinterpret_cast<const __m128i*>(kCrcFold128));
  __m128i x = crc_fold_lane(crc_fold_lane(crc_fold_lane(x0, x1, k128), x2, k128), x3, k128);
  for (; size >= 16; p += 16, size -= 16) x = crc_fold_lane(x, crc_load_lane(p), k128);
  return crc_reduce_lane(x);
}

__attribute__((target("avx512f"))) inline __m512i crc_load_wide(const unsigned char* at) {
  return _mm512_loadu_si512(at);
}

// The same pair in each of the four lanes.
__attribute__((target("avx512f"))) inline __m512i crc_wide_constant(const uint64_t (&k)[2]) {
  return _mm512_set_epi64(static_cast<long long>(k[1]), static_cast<long long>(k[0]), static_cast<long long>(k[1]),
                          static_cast<long long>(k[0]), static_cast<long long>(k[1]), static_cast<long long>(k[0]),
                          static_cast<long long>(k[1]), static_cast<long long>(k[0]));
}

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1"))) inline __m512i crc_fold_wide(__m512i lanes, __m512i next,
                                                                                         __m512i k) {
  const __m512i low = _mm512_clmulepi64_epi128(lanes, k, 0x00);
  const __m512i high = _mm512_clmulepi64_epi128(lanes, k, 0x11);
  return _mm512_ternarylogic_epi64(high, low, next, 0x96);  // high ^ low ^ next
}

// size >= 256 and a multiple of 64: sixteen lanes folded 256 bytes at a time, then four.
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1"))) uint32_t crc_fold_vpclmul(const unsigned char* p,
                                                                                       size_t size, uint32_t inverted) {
  __m512i x0 = _mm512_xor_si512(crc_load_wide(p), _mm512_castsi128_si512(_mm_cvtsi32_si128(static_cast<int>(inverted))));
  __m512i x1 = crc_load_wide(p + 64), x2 = crc_load_wide(p + 128), x3 = crc_load_wide(p + 192);
  p += 256;
  size -= 256;
  const __m512i k2048 = crc_wide_constant(kCrcFold2048);
  for (; size >= 256; p += 256, size -= 256) {
    x0 = crc_fold_wide(x0, crc_load_wide(p), k2048);
    x1 = crc_fold_wide(x1, crc_load_wide(p + 64), k2048);
    x2 = crc_fold_wide(x2, crc_load_wide(p + 128), k2048);
    x3 = crc_fold_wide(x3, crc_load_wide(p + 192), k2048);
  }
  const __m512i k512 = crc_wide_constant(kCrcFold512);
  __m512i x = crc_fold_wide(crc_fold_wide(crc_fold_wide(x0, x1, k512), x2, k512), x3, k512);
  for (; size >= 64; p += 64, size -= 64) x = crc_fold_wide(x, crc_load_wide(p), k512);
  // The four 128-bit lanes of x, oldest first, into one.
  const __m128i k128 = _mm_load_si128(reinterpret_cast<const __m128i*>(kCrcFold128));
  // (Through memory: GCC 12 warns of an uninitialised operand inside _mm512_extracti32x4_epi32.)
  alignas(64) __m128i lanes[4];
  _mm512_store_si512(lanes, x);
  __m128i lane = crc_fold_lane(lanes[0], lanes[1], k128);
  lane = crc_fold_lane(lane, lanes[2], k128);
  lane = crc_fold_lane(lane, lanes[3], k128);
  return crc_reduce_lane(lane);
}
#endif  // MIRRORED_CRC32_FOLDING

uint32_t crc_by(Crc32Method method, const unsigned char* p, size_t size, uint32_t inverted) {
  if (size == 0) return inverted;  // zlib would return 0 for a null pointer: its way of asking for the start value
#ifdef MIRRORED_CRC32_FOLDING
  if (method == Crc32Method::kVpclmulAvx512 && size >= 256) {
    const size_t whole = size & ~size_t{63};
    inverted = crc_fold_vpclmul(p, whole, inverted);
    p += whole;
    size -= whole;
  }
  if (method != Crc32Method::kZlib && size >= 64) {
    const size_t whole = size & ~size_t{15};
    inverted = crc_fold_pclmul(p, whole, inverted);
    p += whole;
    size -= whole;
  }
#endif
  return zlib_crc_tail(inverted, p, size);
}

Crc32Method fastest_supported() {
  for (Crc32Method method : {Crc32Method::kVpclmulAvx512, Crc32Method::kPclmul})
    if (crc32_method_supported(method)) return method;
  return Crc32Method::kZlib;
}

}  // namespace

bool crc32_method_supported(Crc32Method method) {
  switch (method) {
    case Crc32Method::kZlib:
      return true;
#ifdef MIRRORED_CRC32_FOLDING
    case Crc32Method::kPclmul:
      return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    case Crc32Method::kVpclmulAvx512:
      // avx512f is only reported where the OS saves the 512-bit registers.
      return crc32_method_supported(Crc32Method::kPclmul) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("vpclmulqdq");
#else
    case Crc32Method::kPclmul:
    case Crc32Method::kVpclmulAvx512:
      return false;
#endif
  }
  return false;
}

Crc32Method crc32_method_in_use() {
  static const Crc32Method method = fastest_supported();
  return method;
}

std::string_view crc32_method_name(Crc32Method method) {
  switch (method) {
    case Crc32Method::kZlib: return "zlib";
    case Crc32Method::kPclmul: return "pclmul";
    case Crc32Method::kVpclmulAvx512: return "vpclmul-avx512";
  }
  return "?";
}

uint32_t crc32_ieee_with(Crc32Method method, const void* data, size_t size, uint32_t crc) {
  MIRRORED_CHECK(crc32_method_supported(method), "CRC-32 by ", crc32_method_name(method), ": this CPU lacks it");
  return ~crc_by(method, static_cast<const unsigned char*>(data), size, ~crc);
}

uint32_t crc32_ieee(const void* data, size_t size, uint32_t crc) {
  return ~crc_by(crc32_method_in_use(), static_cast<const unsigned char*>(data), size, ~crc);
}

uint32_t crc32_ieee_combine(uint32_t crc_a, uint32_t crc_b, size_t size_b) {
  return static_cast<uint32_t>(crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(size_b)));
}

}  // namespace mirrored::io
