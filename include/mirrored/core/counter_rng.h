#pragma once
// Counter-based random numbers: value `index` of a stream is a pure function of the
// stream's key and the index (SplitMix64 read at an arbitrary position), so the values can
// be drawn one by one, in any order and in parallel, on the host or in a CUDA kernel, with
// the same bits. Dropout masks are drawn this way so that the CPU and GPU kernels agree
// exactly and a GPU thread needs no state.
#include <cstdint>

#include "mirrored/core/host_device.h"

namespace mirrored {

// SplitMix64's output function (Steele, Lea and Flood 2014): a bijection of 64-bit words
// whose output bits each depend on every input bit.
MIRRORED_HOST_DEVICE inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The key of stream `stream` under `seed`: neighbouring streams start far apart.
MIRRORED_HOST_DEVICE inline uint64_t counter_stream_key(uint64_t seed, uint64_t stream) {
  return splitmix64_mix(seed ^ (stream * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull));
}

// Value `index` (from 0) of the SplitMix64 sequence whose state starts at `key`.
MIRRORED_HOST_DEVICE inline uint64_t counter_u64(uint64_t key, uint64_t index) {
  return splitmix64_mix(key + (index + 1) * 0x9E3779B97F4A7C15ull);
}

// Uniform in [0, 1) from the top 24 bits: exact in float, the same on every device.
MIRRORED_HOST_DEVICE inline float counter_uniform(uint64_t key, uint64_t index) {
  return static_cast<float>(counter_u64(key, index) >> 40) * 0x1.0p-24f;
}

}  // namespace mirrored
