// The grid conversions of the exact sum (kernels/exact_grid.h, kernels.h "exact_grid_*"):
// the exponent read from a float's bits is frexp's, on every kind of float; and the GPU
// kernels give the CPU kernels' bits (exponents, integer sums, float sums of non-finite
// segments, rounded totals) on adversarial inputs. The GPU cases skip without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "devices.h"
#include "mirrored/core/cuda_memory.h"
#include "mirrored/kernels/exact_grid.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

int32_t frexp_exponent(float x) {
  int e = 0;
  std::frexp(x, &e);
  return e;
}

TEST(ExactGrid, ExponentFromBitsIsFrexpsOnEveryKindOfFloat) {
  const float denorm_min = std::numeric_limits<float>::denorm_min();
  std::vector<float> values = {denorm_min,      2 * denorm_min, 3 * denorm_min, std::numeric_limits<float>::min(),
                               std::nextafter(std::numeric_limits<float>::min(), 0.0f),
                               std::numeric_limits<float>::max(), 1.0f, 0.5f, 0.75f, 1e-30f, 3e30f};
  std::mt19937 rng(11);
  for (int i = 0; i < 100000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng()) & 0x7fffffffu;
    if (bits >= 0x7f800000u || bits == 0) continue;
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    values.push_back(x);
  }
  for (const float x : values)
    ASSERT_EQ(kernels::grid_exponent(kernels::magnitude_bits(x)), frexp_exponent(x)) << x;
  EXPECT_EQ(kernels::grid_exponent(kernels::magnitude_bits(-0.0f)), kernels::kGridAllZero);
  EXPECT_EQ(kernels::grid_exponent(kernels::magnitude_bits(-std::numeric_limits<float>::infinity())),
            kernels::kGridNonFinite);
  EXPECT_EQ(kernels::grid_exponent(kernels::magnitude_bits(std::numeric_limits<float>::quiet_NaN())),
            kernels::kGridNonFinite);
}

// Terms over six segments: ordinary values, values 2^40 apart, subnormals, all zeros (and
// -0), a NaN, an infinity.
struct GridCase {
  std::vector<size_t> offsets = {0, 300, 301, 700, 750, 1000, 1003};
  std::vector<std::vector<float>> terms;
  static constexpr int64_t kTotalTerms = 7;  // as if other ranks held more

  GridCase() {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    const float tiny = std::numeric_limits<float>::denorm_min();
    for (int t = 0; t < 5; ++t) {
      std::vector<float> term(offsets.back());
      for (size_t i = 0; i < 300; ++i) term[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
      term[300] = t == 0 ? std::ldexp(1.0f, 40) : std::ldexp(1.0f, 20);
      for (size_t i = 301; i < 700; ++i) term[i] = static_cast<float>(static_cast<int>(rng() % 7) - 3) * tiny;
      for (size_t i = 700; i < 750; ++i) term[i] = t % 2 == 0 ? -0.0f : 0.0f;
      for (size_t i = 750; i < 1000; ++i) term[i] = normal(rng);
      if (t == 2) term[800] = std::numeric_limits<float>::quiet_NaN();
      for (size_t i = 1000; i < 1003; ++i) term[i] = normal(rng);
      if (t == 4) term[1001] = std::numeric_limits<float>::infinity();
      terms.push_back(term);
    }
  }
  size_t segments() const { return offsets.size() - 1; }
  size_t count() const { return offsets.back(); }
};

// Every stage of the sum on one device, with buffers there; results read back to the host.
struct GridResults {
  std::vector<int32_t> exponents;
  std::vector<int64_t> sums;
  std::vector<float> plain, out;
};

template <typename T>
T* device_copy(const std::vector<T>& host, Device device, std::vector<void*>& owned) {
  void* p = cuda_allocate(host.size() * sizeof(T), device.index);
  owned.push_back(p);
  cuda_copy(p, host.data(), host.size() * sizeof(T));
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> host_copy(const T* p, size_t n) {
  std::vector<T> host(n);
  cuda_copy(host.data(), p, n * sizeof(T));
  return host;
}

GridResults run_on_cpu(const GridCase& c) {
  GridResults r{std::vector<int32_t>(c.segments()), std::vector<int64_t>(c.count()),
                std::vector<float>(c.count()), std::vector<float>(c.count())};
  std::vector<const float*> terms;
  for (const auto& t : c.terms) terms.push_back(t.data());
  kernels::exact_grid_exponents(terms, c.offsets, r.exponents.data(), Device::cpu());
  kernels::exact_grid_sums(terms, c.offsets, r.exponents.data(), GridCase::kTotalTerms, r.sums.data(), Device::cpu());
  kernels::exact_grid_plain_sums(terms, c.offsets, r.exponents.data(), r.plain.data(), Device::cpu());
  kernels::exact_grid_round(r.sums.data(), r.plain.data(), c.offsets, r.exponents.data(), GridCase::kTotalTerms,
                            r.out.data(), Device::cpu());
  return r;
}

GridResults run_on(const GridCase& c, Device device) {
  std::vector<void*> owned;
  std::vector<const float*> terms;
  for (const auto& t : c.terms) terms.push_back(device_copy(t, device, owned));
  int32_t* exponents = device_copy(std::vector<int32_t>(c.segments()), device, owned);
  int64_t* sums = device_copy(std::vector<int64_t>(c.count()), device, owned);
  float* plain = device_copy(std::vector<float>(c.count()), device, owned);
  float* out = device_copy(std::vector<float>(c.count()), device, owned);
  kernels::exact_grid_exponents(terms, c.offsets, exponents, device);
  kernels::exact_grid_sums(terms, c.offsets, exponents, GridCase::kTotalTerms, sums, device);
  kernels::exact_grid_plain_sums(terms, c.offsets, exponents, plain, device);
  kernels::exact_grid_round(sums, plain, c.offsets, exponents, GridCase::kTotalTerms, out, device);
  GridResults r{host_copy(exponents, c.segments()), host_copy(sums, c.count()), host_copy(plain, c.count()),
                host_copy(out, c.count())};
  for (void* p : owned) cuda_free(p);
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ExactGrid, CpuStagesOnAdversarialSegments) {
  const GridCase c;
  const GridResults r = run_on_cpu(c);
  EXPECT_EQ(r.exponents[1], 41) << "2^40 sets the grid of its segment";
  EXPECT_EQ(r.exponents[3], kernels::kGridAllZero);
  EXPECT_EQ(r.exponents[4], kernels::kGridNonFinite);
  EXPECT_EQ(r.exponents[5], kernels::kGridNonFinite);
  EXPECT_EQ(r.out[300], std::ldexp(1.0f, 40) + std::ldexp(1.0f, 22)) << "the four 2^20s survive beside 2^40";
  EXPECT_TRUE(std::isnan(r.out[800]));
  EXPECT_EQ(r.out[1001], std::numeric_limits<float>::infinity());
  EXPECT_FALSE(std::signbit(r.out[700])) << "-0 terms sum to +0";
}

// The reference every CPU stage must match bit for bit: each value put on its segment's grid
// with grid_integer, the integers added one term at a time, the total back with
// grid_to_float (kernels/exact_grid.h), whatever the kernels group or vectorise.
struct ReferenceStages {
  std::vector<int32_t> exponents;
  std::vector<int64_t> sums;
  std::vector<float> out;
};

ReferenceStages reference_stages(const std::vector<std::vector<float>>& terms, const std::vector<size_t>& offsets,
                                 int64_t total_terms) {
  const size_t count = offsets.back();
  ReferenceStages r{std::vector<int32_t>(offsets.size() - 1), std::vector<int64_t>(count, 0),
                    std::vector<float>(count)};
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    uint32_t largest = 0;
    for (const auto& term : terms)
      for (size_t i = offsets[s]; i < offsets[s + 1]; ++i) largest = std::max(largest, kernels::magnitude_bits(term[i]));
    r.exponents[s] = kernels::grid_exponent(largest);
    const bool on_grid = r.exponents[s] != kernels::kGridAllZero;
    const int quantum = on_grid ? kernels::grid_quantum(r.exponents[s], total_terms) : 0;
    const double scale = std::ldexp(1.0, -quantum);
    for (size_t i = offsets[s]; i < offsets[s + 1]; ++i) {
      if (on_grid)
        for (const auto& term : terms) r.sums[i] += kernels::grid_integer(term[i], scale);
      r.out[i] = kernels::grid_to_float(r.sums[i], quantum, std::ldexp(1.0f, quantum));
    }
  }
  return r;
}

// 1 to 9 terms (the kernels take up to four at a time), segments of odd lengths (vector
// tails), magnitudes from subnormal to 2^100 (the slow rounding outside the float scale).
TEST(ExactGrid, CpuStagesMatchTheReferenceFormulasForAnyNumberOfTerms) {
  const std::vector<size_t> offsets = {0, 1, 18, 2100, 2101, 4300, 4333, 4400};
  const int scales[] = {0, -130, 100, -10, 20, -149, 5};
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (int count = 1; count <= 9; ++count) {
    std::vector<std::vector<float>> terms(static_cast<size_t>(count), std::vector<float>(offsets.back()));
    for (auto& term : terms)
      for (size_t s = 0; s + 1 < offsets.size(); ++s)
        for (size_t i = offsets[s]; i < offsets[s + 1]; ++i)
          term[i] = std::ldexp(normal(rng), scales[s] + static_cast<int>(rng() % 5));
    std::vector<const float*> pointers;
    for (const auto& term : terms) pointers.push_back(term.data());
    const int64_t total_terms = count + 3;  // as if other ranks held more
    const ReferenceStages want = reference_stages(terms, offsets, total_terms);
    std::vector<int32_t> exponents(offsets.size() - 1);
    std::vector<int64_t> sums(offsets.back(), -1);
    std::vector<float> out(offsets.back());
    kernels::exact_grid_exponents(pointers, offsets, exponents.data(), Device::cpu());
    ASSERT_EQ(exponents, want.exponents) << count << " terms";
    kernels::exact_grid_sums(pointers, offsets, exponents.data(), total_terms, sums.data(), Device::cpu());
    ASSERT_EQ(sums, want.sums) << count << " terms";
    kernels::exact_grid_round(sums.data(), nullptr, offsets, exponents.data(), total_terms, out.data(), Device::cpu());
    ASSERT_EQ(0, std::memcmp(out.data(), want.out.data(), out.size() * sizeof(float))) << count << " terms";
  }
}

// Spent terms zeroed as the sums read them: the same integer sums, every spent value +0
// (no -0 left, all-zero and non-finite segments included: a skipped segment is zeroed too),
// over blocks longer than the kernel's, and the other terms untouched.
TEST(ExactGrid, SumsThatZeroSpentTermsGiveTheSameSumsAndLeaveEveryValuePlusZero) {
  GridCase c;
  for (auto& term : c.terms) term.insert(term.end(), 5000, 0.0f);
  c.offsets.push_back(c.offsets.back() + 5000);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  for (auto& term : c.terms)
    for (size_t i = c.offsets[c.offsets.size() - 2]; i < c.offsets.back(); ++i) term[i] = normal(rng);
  const GridResults want = run_on_cpu(c);
  std::vector<std::vector<float>> terms = c.terms;
  std::vector<const float*> pointers;
  for (const auto& t : terms) pointers.push_back(t.data());
  std::vector<float*> spent = {terms[0].data(), terms[3].data()};
  std::vector<int64_t> sums(c.count() + 5000, -1);
  kernels::exact_grid_sums(pointers, c.offsets, want.exponents.data(), GridCase::kTotalTerms, sums.data(), spent,
                           Device::cpu());
  sums.resize(want.sums.size());
  EXPECT_EQ(sums, want.sums);
  for (const size_t t : {size_t{0}, size_t{3}})
    for (size_t i = 0; i < terms[t].size(); ++i)
      ASSERT_EQ(kernels::magnitude_bits(terms[t][i]) | (std::signbit(terms[t][i]) ? 1u << 31 : 0u), 0u)
          << "term " << t << " value " << i;
  for (const size_t t : {size_t{1}, size_t{2}, size_t{4}})
    EXPECT_EQ(0, std::memcmp(terms[t].data(), c.terms[t].data(), terms[t].size() * sizeof(float)));
}

// A term's largest magnitudes found when it is set aside give, with a scan of the other
// terms, the exponents of a scan over every term.
TEST(ExactGrid, LargestMagnitudesOfTermsSetAsideGiveTheExponentsOfAFullScan) {
  const GridCase c;
  std::vector<uint32_t> known(c.segments()), second(c.segments());
  kernels::exact_grid_largest(c.terms[0].data(), c.offsets, known.data(), Device::cpu());
  kernels::exact_grid_largest(c.terms[1].data(), c.offsets, second.data(), Device::cpu());
  EXPECT_EQ(known[3], 0u) << "zeros and -0";
  EXPECT_EQ(known[1], kernels::magnitude_bits(std::ldexp(1.0f, 40)));
  for (size_t s = 0; s < c.segments(); ++s) known[s] = std::max(known[s], second[s]);
  std::vector<const float*> rest, all;
  for (size_t t = 0; t < c.terms.size(); ++t) {
    all.push_back(c.terms[t].data());
    if (t >= 2) rest.push_back(c.terms[t].data());
  }
  std::vector<int32_t> from_known(c.segments()), from_scan(c.segments());
  kernels::exact_grid_exponents(rest, c.offsets, known.data(), from_known.data(), Device::cpu());
  kernels::exact_grid_exponents(all, c.offsets, from_scan.data(), Device::cpu());
  EXPECT_EQ(from_known, from_scan);
}

class ExactGridOnCuda : public testing::CudaTest {};

TEST_F(ExactGridOnCuda, EveryStageGivesTheCpuBits) {
  const GridCase c;
  const GridResults cpu = run_on_cpu(c);
  const GridResults gpu = run_on(c, Device::cuda(0));
  EXPECT_EQ(gpu.exponents, cpu.exponents);
  EXPECT_EQ(gpu.sums, cpu.sums);
  EXPECT_TRUE(same_bits(gpu.plain, cpu.plain));
  EXPECT_TRUE(same_bits(gpu.out, cpu.out));
}

TEST_F(ExactGridOnCuda, OutMayBeOneOfTheTerms) {
  GridCase c;
  const GridResults cpu = run_on_cpu(c);
  std::vector<void*> owned;
  const Device gpu = Device::cuda(0);
  std::vector<const float*> terms;
  for (const auto& t : c.terms) terms.push_back(device_copy(t, gpu, owned));
  int32_t* exponents = device_copy(std::vector<int32_t>(c.segments()), gpu, owned);
  int64_t* sums = device_copy(std::vector<int64_t>(c.count()), gpu, owned);
  float* plain = device_copy(std::vector<float>(c.count()), gpu, owned);
  float* out = const_cast<float*>(terms.front());
  kernels::exact_grid_exponents(terms, c.offsets, exponents, gpu);
  kernels::exact_grid_sums(terms, c.offsets, exponents, GridCase::kTotalTerms, sums, gpu);
  kernels::exact_grid_plain_sums(terms, c.offsets, exponents, plain, gpu);
  kernels::exact_grid_round(sums, plain, c.offsets, exponents, GridCase::kTotalTerms, out, gpu);
  EXPECT_TRUE(same_bits(host_copy(out, c.count()), cpu.out));
  for (void* p : owned) cuda_free(p);
}

}  // namespace
}  // namespace mirrored
