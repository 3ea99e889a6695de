#pragma once
// Deterministic random numbers, identical on every platform and standard library (the
// std distributions are not), so a seed fixes the data order and the initial weights.
#include <array>
#include <cstdint>

namespace mirrored {

class Rng {
 public:
  // `stream` separates independent sequences drawn from one seed (weights, data order...).
  explicit Rng(uint64_t seed, uint64_t stream = 0);

  uint64_t next_u64();                    // xoshiro256**
  uint64_t below(uint64_t bound);         // uniform in [0, bound), unbiased
  float uniform();                        // [0, 1)
  float normal();                         // standard normal, Box-Muller (GPT initialisation)
  float uniform(float lo, float hi);

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }

 private:
  State s_;
};

}  // namespace mirrored
