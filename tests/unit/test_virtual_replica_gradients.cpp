// The virtual replicas' gradients on one rank (distribute/virtual_replica_gradients.h): each
// new replica starts from +0 at every value, also when its buffer is a slot the previous
// step's exact sum zeroed as it read it, and the sum gives the bits of an exact sum of the
// replicas' gradients, over steps with micro-batches taken back and a NaN that keeps the
// exact sum from zeroing its terms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mirrored/comm/exact_sum.h"
#include "mirrored/comm/local_communicator.h"
#include "mirrored/distribute/virtual_replica_gradients.h"
#include "mirrored/nn/builders.h"

namespace mirrored {
namespace {

// Every value's bits are those of +0.
bool all_plus_zero(const Tensor& t) {
  const auto* bits = static_cast<const unsigned char*>(static_cast<const void*>(t.data<float>()));
  for (size_t i = 0; i < static_cast<size_t>(t.numel()) * sizeof(float); ++i)
    if (bits[i] != 0) return false;
  return true;
}

TEST(VirtualReplicaGradients, NewReplicasStartFromPlusZeroAndTheSumIsExactOverSteps) {
  nn::Model model = nn::mlp({{64, 32}, 10});
  model.build({1, 8, 8});
  nn::ParameterArena& arena = model.parameters();
  constexpr int kReplicas = 3, kMicro = 2;
  distribute::VirtualReplicaGradients gradients(arena, kReplicas, kReplicas);
  comm::LocalCommunicator local;
  std::mt19937 rng(21);
  std::normal_distribution<float> normal;
  const auto count = static_cast<size_t>(arena.numel());
  // Segments as the class cuts them: one per parameter tensor.
  std::vector<size_t> starts, offsets = {0};
  for (const nn::ParameterInfo& info : arena.infos()) starts.push_back(static_cast<size_t>(info.offset));
  std::sort(starts.begin(), starts.end());
  for (const size_t start : starts)
    if (start > offsets.back()) offsets.push_back(start);
  if (count > offsets.back()) offsets.push_back(count);
  ASSERT_GT(offsets.size(), 3u) << "several segments";

  for (int step = 0; step < 4; ++step) {
    arena.zero_grads();
    gradients.restart();
    // Replica r's running sum, as backward would accumulate it (micro-batch by micro-batch).
    std::vector<std::vector<float>> want(kReplicas, std::vector<float>(count, 0.0f));
    for (int micro = 0; micro < kMicro; ++micro) {
      for (int r = 0; r < kReplicas; ++r) {
        gradients.begin(r);
        float* g = arena.flat_grads().data<float>();
        if (micro == 0) ASSERT_TRUE(all_plus_zero(arena.flat_grads())) << "step " << step << " replica " << r;
        for (size_t i = 0; i < count; ++i) {
          const float x = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 12) - 6);
          g[i] += x;
          want[static_cast<size_t>(r)][i] += x;
        }
        if (step == 1 && micro == 1 && r == 0) {
          g[5] = std::numeric_limits<float>::quiet_NaN();  // this step's sum keeps its terms
          want[0][5] = g[5];
        }
      }
    }
    gradients.sum(local, 0.5f);
    std::vector<const float*> terms;
    for (const auto& w : want) terms.push_back(w.data());
    std::vector<float> expected(count);
    comm::exact_sum(terms, {offsets, kReplicas}, expected.data(), local);
    for (float& x : expected) x *= 0.5f;
    const float* got = arena.flat_grads().data<float>();
    ASSERT_EQ(0, std::memcmp(got, expected.data(), count * sizeof(float))) << "step " << step;
    if (step == 1) EXPECT_TRUE(std::isnan(got[5]));
  }
}

}  // namespace
}  // namespace mirrored
