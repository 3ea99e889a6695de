// The order-independent sum (comm/exact_sum.h) on one process: adversarial inputs, order
// independence, and accuracy against float64 on real gradients. tests/mpi/test_exact_sum.cpp
// spreads the same terms over ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mirrored/comm/exact_sum.h"
#include "mirrored/comm/local_communicator.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"

namespace mirrored {
namespace {

std::vector<float> sum_of(const std::vector<std::vector<float>>& terms, std::vector<size_t> offsets = {}) {
  comm::LocalCommunicator local;
  const size_t count = terms.front().size();
  if (offsets.empty()) offsets = {0, count};
  std::vector<const float*> pointers;
  for (const auto& t : terms) pointers.push_back(t.data());
  std::vector<float> out(count);
  comm::exact_sum(pointers, {offsets, static_cast<int64_t>(terms.size())}, out.data(), local);
  return out;
}

float exact_double(const std::vector<std::vector<float>>& terms, size_t i) {
  long double sum = 0;  // exact here: every case below fits a long double's 64 bits
  for (const auto& t : terms) sum += t[i];
  return static_cast<float>(sum);
}

// Every term but the last set aside as the gradient slots are (distribute/
// virtual_replica_gradients.h): their largest magnitudes known, each spent by the sum; the
// last is the arena, a term and the output. `all` lists every term.
struct SetAside {
  std::vector<uint32_t> known;
  std::vector<const float*> all;
  std::vector<float*> spent;
};
SetAside set_aside_all_but_the_last(std::vector<std::vector<float>>& terms, const std::vector<size_t>& offsets) {
  SetAside aside;
  aside.known.assign(offsets.size() - 1, 0);
  std::vector<uint32_t> largest(offsets.size() - 1);
  for (size_t t = 0; t + 1 < terms.size(); ++t) {
    kernels::exact_grid_largest(terms[t].data(), offsets, largest.data(), Device::cpu());
    for (size_t s = 0; s < largest.size(); ++s) aside.known[s] = std::max(aside.known[s], largest[s]);
    aside.all.push_back(terms[t].data());
    aside.spent.push_back(terms[t].data());
  }
  aside.all.push_back(terms.back().data());
  return aside;
}

TEST(ExactSum, CancellationKeepsTheSmallTerm) {
  // In float32, (1e8 + 1) - 1e8 is 0; the exact sum is 1.
  EXPECT_EQ(sum_of({{1e8f}, {1.0f}, {-1e8f}}), std::vector<float>{1.0f});
}

TEST(ExactSum, TermsFarApartRoundOnceAtTheEnd) {
  const float big = std::ldexp(1.0f, 40), small = 1.0f;
  std::vector<std::vector<float>> terms = {{big}};
  for (int i = 0; i < 1 << 20; i += 1 << 15) terms.push_back({small});  // 32 ones
  // 2^40 + 32 is a float (24 bits reach 2^40 / 2^17 = 8); a float32 running sum drops
  // every single 1 (half an ulp of 2^40 is 2^16).
  EXPECT_EQ(sum_of(terms)[0], big + 32.0f);
  float running = big;
  for (size_t t = 1; t < terms.size(); ++t) running += terms[t][0];
  EXPECT_EQ(running, big) << "the float32 sum this improves on";
}

TEST(ExactSum, DenormalsSumExactly) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(sum_of({{tiny}, {tiny}, {3 * tiny}}), std::vector<float>{5 * tiny});
  EXPECT_EQ(sum_of({{tiny}, {-tiny}}), std::vector<float>{0.0f});
}

TEST(ExactSum, SignedZerosSumToPositiveZero) {
  const auto out = sum_of({{-0.0f, 0.0f}, {-0.0f, -0.0f}});
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_FALSE(std::signbit(out[0]));
  EXPECT_FALSE(std::signbit(out[1]));
}

TEST(ExactSum, NonFiniteTermsPropagateInTheirSegmentOnly) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Segments {0, 1}, {2}, {3}: NaN in the first, +Inf in the second, both infinities in the
  // third (NaN, as IEEE addition gives), and the fourth finite and exact.
  const auto out = sum_of({{nan, 1.0f, inf, inf, 1e8f}, {1.0f, 2.0f, 1.0f, -inf, 1.0f}, {0, 0, 0, 0, -1e8f}},
                          {0, 2, 3, 4, 5});
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 3.0f) << "the rest of a NaN's segment is summed in float32";
  EXPECT_EQ(out[2], inf);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(out[4], 1.0f);
}

// Terms set aside with their largest magnitudes found (kernels::exact_grid_largest) and
// handed over: the bits of the sum that scans every term, a NaN segment's float sum included.
TEST(ExactSum, KnownLargestMagnitudesGiveTheBitsOfAFullScan) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  const std::vector<size_t> offsets = {0, 40, 41, 300, 333};
  std::vector<std::vector<float>> terms(6, std::vector<float>(offsets.back()));
  for (size_t t = 0; t < terms.size(); ++t)
    for (auto& x : terms[t]) x = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 30) - 15 - 4 * static_cast<int>(t));
  terms[1][320] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> want = sum_of(terms, offsets);
  // Terms 0-3 set aside with their largest magnitudes, 4 and 5 scanned by the sum; the
  // output is the last term, as in the gradient arena.
  std::vector<uint32_t> known(offsets.size() - 1, 0), largest(offsets.size() - 1);
  std::vector<const float*> all;
  for (size_t t = 0; t < 4; ++t) {
    kernels::exact_grid_largest(terms[t].data(), offsets, largest.data(), Device::cpu());
    for (size_t s = 0; s < known.size(); ++s) known[s] = std::max(known[s], largest[s]);
    all.push_back(terms[t].data());
  }
  std::vector<float> arena = terms[5];
  all.push_back(terms[4].data());
  all.push_back(arena.data());
  comm::LocalCommunicator local;
  comm::ExactSum sum({offsets, static_cast<int64_t>(terms.size())});
  sum(all, {terms[4].data(), arena.data()}, known.data(), arena.data(), Device::cpu(), local);
  ASSERT_EQ(arena.size(), want.size());
  EXPECT_EQ(0, std::memcmp(arena.data(), want.data(), want.size() * sizeof(float)));
  EXPECT_TRUE(std::isnan(arena[320]));
}

// Spent terms (the set-aside slots a caller reuses as zeroed accumulators) zeroed by the
// sum: the bits of the sum that leaves them, every spent value +0 after; with a NaN in a
// segment nothing is zeroed (its float sum reads the terms again) and the call says so.
TEST(ExactSum, ZeroingSpentTermsKeepsTheBitsAndIsRefusedWhenASegmentIsNotFinite) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  const std::vector<size_t> offsets = {0, 40, 41, 3000, 5333};
  std::vector<std::vector<float>> terms(5, std::vector<float>(offsets.back()));
  for (size_t t = 0; t < terms.size(); ++t)
    for (auto& x : terms[t]) x = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 30) - 15 - 3 * static_cast<int>(t));
  terms[2][40] = -0.0f;
  for (const bool with_nan : {false, true}) {
    std::vector<std::vector<float>> these = terms;
    if (with_nan) these[1][100] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<std::vector<float>> before = these;
    const std::vector<float> want = sum_of(these, offsets);
    const SetAside aside = set_aside_all_but_the_last(these, offsets);
    float* arena = these.back().data();
    comm::LocalCommunicator local;
    comm::ExactSum sum({offsets, static_cast<int64_t>(these.size())});
    const bool zeroed = sum(aside.all, {arena}, aside.known.data(), aside.spent, arena, Device::cpu(), local);
    EXPECT_EQ(0, std::memcmp(arena, want.data(), want.size() * sizeof(float))) << "with a NaN: " << with_nan;
    EXPECT_EQ(zeroed, !with_nan);
    for (size_t t = 0; t + 1 < these.size(); ++t) {
      if (with_nan) {
        EXPECT_EQ(0, std::memcmp(these[t].data(), before[t].data(), before[t].size() * sizeof(float))) << "term " << t;
        continue;
      }
      const std::vector<float> zeros(terms[t].size(), 0.0f);
      EXPECT_EQ(0, std::memcmp(these[t].data(), zeros.data(), zeros.size() * sizeof(float))) << "term " << t;
    }
  }
}

// The sum goes through host buffers window by window (sum, all-reduce, round, scale while
// a window is in cache): segments cut by the windows' edges, an empty one, an all-zero one
// and a tiny one give the bits of the grid kernels run once over the whole buffer, times
// the scale in float, and every spent term ends +0.
TEST(ExactSum, WindowsAcrossSegmentsGiveTheBitsOfOnePassTimesTheScale) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal;
  const std::vector<size_t> offsets = {0, 5, 5, 32767, 32769, 70000, 90000, 100001, 100003};
  std::vector<std::vector<float>> terms(4, std::vector<float>(offsets.back()));
  for (size_t t = 0; t < terms.size(); ++t)
    for (size_t i = 0; i < offsets.back(); ++i)
      terms[t][i] = i >= 70000 && i < 90000 ? 0.0f
                    : i >= 100001          ? std::ldexp(normal(rng), -140)
                                           : normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 30) - 15);
  const auto total = static_cast<int64_t>(terms.size());
  // The reference: each grid stage once over the whole buffer.
  std::vector<const float*> pointers;
  for (const auto& t : terms) pointers.push_back(t.data());
  std::vector<int32_t> exponents(offsets.size() - 1);
  std::vector<int64_t> sums(offsets.back());
  std::vector<float> want(offsets.back());
  kernels::exact_grid_exponents(pointers, offsets, exponents.data(), Device::cpu());
  kernels::exact_grid_sums(pointers, offsets, exponents.data(), total, sums.data(), Device::cpu());
  kernels::exact_grid_round(sums.data(), nullptr, offsets, exponents.data(), total, want.data(), Device::cpu());
  const float scale = 1.0f / 6.0f;
  for (float& x : want) x *= scale;

  std::vector<std::vector<float>> these = terms;
  const SetAside aside = set_aside_all_but_the_last(these, offsets);
  float* arena = these.back().data();
  comm::LocalCommunicator local;
  comm::ExactSum sum({offsets, total});
  ASSERT_TRUE(sum(aside.all, {arena}, aside.known.data(), aside.spent, arena, Device::cpu(), local, scale));
  EXPECT_EQ(0, std::memcmp(arena, want.data(), want.size() * sizeof(float)));
  EXPECT_NE(arena[100002], 0.0f) << "the tiny segment sums on a grid of its own";
  const std::vector<float> zeros(offsets.back(), 0.0f);
  for (size_t t = 0; t + 1 < these.size(); ++t)
    EXPECT_EQ(0, std::memcmp(these[t].data(), zeros.data(), zeros.size() * sizeof(float))) << "term " << t;

  // A segment that is not finite takes the one-pass route: the scale applies there too.
  these = terms;
  these[0][50000] = std::numeric_limits<float>::infinity();
  std::vector<float> out(offsets.back());
  std::vector<const float*> with_inf;
  for (const auto& t : these) with_inf.push_back(t.data());
  std::vector<uint32_t> none(offsets.size() - 1, 0);
  ASSERT_FALSE(sum(with_inf, with_inf, none.data(), {these[1].data()}, out.data(), Device::cpu(), local, scale));
  EXPECT_EQ(out[50000], std::numeric_limits<float>::infinity());
  EXPECT_EQ(0, std::memcmp(out.data(), want.data(), 32769 * sizeof(float))) << "finite segments keep their bits";
}

TEST(ExactSum, OrderOfTermsDoesNotChangeTheBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> terms(12, std::vector<float>(257));
  for (auto& t : terms)
    for (auto& x : t) x = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
  const auto first = sum_of(terms, {0, 100, 257});
  for (int shuffle = 0; shuffle < 5; ++shuffle) {
    std::shuffle(terms.begin(), terms.end(), rng);
    EXPECT_EQ(sum_of(terms, {0, 100, 257}), first);
  }
}

// Per-micro-batch gradients of a real model (an mlp on random images), the shape a
// world-size-invariant reduction sums: the exact sum is at least as close to the float64
// sum as a float32 all-reduce's, elementwise in total and at its worst.
TEST(ExactSum, AtLeastAsCloseToFloat64AsAFloat32SumOnRealGradients) {
  nn::Model model = nn::mlp({{64, 32}, 10});
  model.build({1, 8, 8});
  model.initialize(3);
  nn::CrossEntropyLoss loss;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> grads;
  for (int micro = 0; micro < 12; ++micro) {
    Tensor x({16, 1, 8, 8}, DType::kF32), y({16}, DType::kI32);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = normal(rng);
    for (int64_t i = 0; i < y.numel(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng() % 10);
    model.parameters().zero_grads();
    loss.forward(model.forward(x, nn::Mode::kTrain), y);
    model.backward(loss.grad());
    grads.push_back(model.parameters().flat_grads().to_vector());
  }
  // One segment (one grid) per parameter tensor.
  std::vector<size_t> offsets{static_cast<size_t>(model.parameters().numel())};
  for (const auto& info : model.parameters().infos()) offsets.push_back(static_cast<size_t>(info.offset));
  std::sort(offsets.begin(), offsets.end());
  const auto exact = sum_of(grads, offsets);
  double exact_error = 0, float_error = 0, exact_worst = 0, float_worst = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    double reference = 0;
    float running = 0;
    for (const auto& g : grads) {
      reference += g[i];
      running += g[i];
    }
    exact_error += std::abs(exact[i] - reference);
    float_error += std::abs(running - reference);
    exact_worst = std::max(exact_worst, std::abs(exact[i] - reference));
    float_worst = std::max(float_worst, std::abs(running - reference));
    ASSERT_EQ(exact[i], exact_double(grads, i)) << "element " << i << ": one rounding of the exact sum";
  }
  EXPECT_GT(float_error, 0.0) << "a case where float32 order matters";
  EXPECT_LE(exact_error, float_error);
  EXPECT_LE(exact_worst, float_worst);
}

TEST(ExactSum, ScalarSumsAreExactAndOrderFree) {
  comm::LocalCommunicator local;
  EXPECT_EQ(comm::exact_sum({1e16, 1.0, -1e16}, 3, local), 1.0);
  EXPECT_EQ(comm::exact_sum({0.1, 0.2, 0.3}, 3, local), comm::exact_sum({0.3, 0.1, 0.2}, 3, local));
  EXPECT_TRUE(std::isnan(comm::exact_sum({1.0, std::nan("")}, 2, local)));
}

}  // namespace
}  // namespace mirrored
