#pragma once
// FNV-1a, 64-bit: a cheap fingerprint of bytes, compared exactly (replicas' parameters,
// their start-up descriptions, dropout stream names). Not for security. `hash` continues
// an earlier fingerprint, so pieces can be fed in turn.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mirrored {

inline constexpr uint64_t kFingerprintStart = 0xcbf29ce484222325ull;

inline uint64_t fingerprint_bytes(const void* data, size_t size, uint64_t hash = kFingerprintStart) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

inline uint64_t fingerprint_text(std::string_view text, uint64_t hash = kFingerprintStart) {
  return fingerprint_bytes(text.data(), text.size(), hash);
}

}  // namespace mirrored
