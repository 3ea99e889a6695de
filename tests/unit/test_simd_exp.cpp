// softmax_exp_lanes (src/kernels/cpu/simd_exp.h), the vector form the fused attention
// computes with, against the scalar softmax_exp that the CUDA kernels share: the same bits
// in every lane, at 4, 8 and 16 lanes, over a sweep of every float's bit pattern, densely
// over the softmax's range [-88, 1], and at the edges (the -87 clamp, 0, infinities, NaN).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../../src/kernels/cpu/simd_exp.h"
#include "mirrored/kernels/transformer_math.h"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace mirrored {
namespace {

std::vector<float> inputs() {
  std::vector<float> x;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4093) x.push_back(std::bit_cast<float>(uint32_t(bits)));
  for (float v = -88.0f; v <= 1.0f; v += 1.0f / 4096) x.push_back(v);
  const float edges[] = {0.0f, -0.0f, -87.0f, 87.0f, 88.0f, -88.0f, 1e-30f, -1e-30f,
                         std::nextafter(-87.0f, 0.0f), std::nextafter(-87.0f, -100.0f),
                         std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()};
  x.insert(x.end(), std::begin(edges), std::end(edges));
  while (x.size() % 16 != 0) x.push_back(-1.0f);
  return x;
}

template <class V>
int64_t lanes_differing(const std::vector<float>& x) {
  constexpr size_t kLanes = sizeof(V) / sizeof(float);
  int64_t differing = 0;
  for (size_t i = 0; i < x.size(); i += kLanes) {
    V v;
    std::memcpy(&v, x.data() + i, sizeof v);
    const V e = kernels::cpu::softmax_exp_lanes(v);
    for (size_t l = 0; l < kLanes; ++l) {
      const float want = kernels::softmax_exp(x[i + l]);
      if (std::bit_cast<uint32_t>(e[l]) != std::bit_cast<uint32_t>(want) && differing++ < 5)
        ADD_FAILURE() << "softmax_exp(" << x[i + l] << ") = " << want << " in scalar, " << e[l] << " in lane " << l;
    }
  }
  return differing;
}

TEST(SimdExp, EveryLaneHasTheScalarFormulasBits) {
  const std::vector<float> x = inputs();
  ASSERT_GT(x.size(), 1000000u);
  EXPECT_EQ(lanes_differing<float __attribute__((vector_size(16)))>(x), 0);
  EXPECT_EQ(lanes_differing<float __attribute__((vector_size(32)))>(x), 0);
  EXPECT_EQ(lanes_differing<float __attribute__((vector_size(64)))>(x), 0);
}

}  // namespace
}  // namespace mirrored
