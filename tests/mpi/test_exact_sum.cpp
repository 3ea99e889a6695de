// The order-independent sum over ranks: 7 terms (a count no world size here divides) spread
// unevenly over the ranks give the bits that one process summing all 7 gets. The buffer
// spans several of the sum's windows, with a segment across their edges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "mirrored/comm/exact_sum.h"
#include "mirrored/comm/local_communicator.h"
#include "mpi_env.h"

namespace {

constexpr int kTerms = 7;
constexpr size_t kCount = 100003;

// Term t: values over ~2^30 of magnitudes, the same on every rank (seeded by t).
std::vector<float> term(int t) {
  std::mt19937 rng(static_cast<unsigned>(100 + t));
  std::normal_distribution<float> normal;
  std::vector<float> values(kCount);
  for (auto& v : values) v = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 30) - 15);
  return values;
}

std::vector<float> sum(const std::vector<std::vector<float>>& terms, mirrored::comm::Communicator& comm) {
  std::vector<const float*> pointers;
  for (const auto& t : terms) pointers.push_back(t.data());
  std::vector<float> out(kCount);
  mirrored::comm::exact_sum(pointers, {{0, 300, 40000, kCount}, kTerms}, out.data(), comm);
  return out;
}

TEST(ExactSumOverRanks, UnevenSharesGiveTheBitsOfOneProcess) {
  auto& world = test_runtime().world();
  const int n = world.size(), r = world.rank();
  std::vector<std::vector<float>> all, mine;
  for (int t = 0; t < kTerms; ++t) all.push_back(term(t));
  // Rank r holds terms [7r/n, 7(r+1)/n), in reverse order: neither the split nor the order
  // on a rank may matter.
  for (int t = kTerms * (r + 1) / n - 1; t >= kTerms * r / n; --t) mine.push_back(all[static_cast<size_t>(t)]);
  mirrored::comm::LocalCommunicator local;
  const std::vector<float> expected = sum(all, local), got = sum(mine, world);
  ASSERT_EQ(std::memcmp(expected.data(), got.data(), kCount * sizeof(float)), 0) << "rank " << r << " of " << n;

  std::vector<double> losses;
  for (int t = kTerms * r / n; t < kTerms * (r + 1) / n; ++t) losses.push_back(0.1 * (t + 1) + 1e-17 * t);
  std::vector<double> every;
  for (int t = 0; t < kTerms; ++t) every.push_back(0.1 * (t + 1) + 1e-17 * t);
  EXPECT_EQ(mirrored::comm::exact_sum(losses, kTerms, world), mirrored::comm::exact_sum(every, kTerms, local));
}

}  // namespace
