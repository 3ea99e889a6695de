#include "mirrored/core/rng.h"

#include "mirrored/core/counter_rng.h"

#include <cmath>
#include <numbers>

namespace mirrored {
namespace {
uint64_t splitmix64(uint64_t& x) { return splitmix64_mix(x += 0x9E3779B97F4A7C15ull); }
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
  for (auto& word : s_) word = splitmix64(x);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t bound) {
  // Lemire's rejection: unbiased for every bound.
  const uint64_t threshold = -bound % bound;
  while (true) {
    const uint64_t r = next_u64();
    const __uint128_t m = static_cast<__uint128_t>(r) * bound;
    if (static_cast<uint64_t>(m) >= threshold) return static_cast<uint64_t>(m >> 64);
  }
}

float Rng::uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

float Rng::uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

float Rng::normal() {
  // 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  const double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

}  // namespace mirrored
