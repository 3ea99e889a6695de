// CRC-32 (io/crc32_ieee.h): every implementation this CPU can run gives zlib's crc32 for
// every length, alignment and starting value, whole or in pieces; the checkpoint file's
// checksum depends on it bit for bit.
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <string>
#include <vector>

#include "mirrored/io/crc32_ieee.h"

namespace mirrored::io {
namespace {

uint32_t zlib_crc(const unsigned char* data, size_t size, uint32_t crc = 0) {
  return static_cast<uint32_t>(crc32_z(crc, data, size));
}

std::vector<unsigned char> random_bytes(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> bytes(size);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  return bytes;
}

class Crc32IeeeTest : public ::testing::TestWithParam<Crc32Method> {
 protected:
  void SetUp() override {
    if (!crc32_method_supported(GetParam()))
      GTEST_SKIP() << "this CPU lacks the instructions of CRC-32 by " << crc32_method_name(GetParam());
  }
  uint32_t crc(const unsigned char* data, size_t size, uint32_t start = 0) const {
    return crc32_ieee_with(GetParam(), data, size, start);
  }
};

TEST_P(Crc32IeeeTest, EqualsZlibForEveryLengthUpTo4096AtEveryAlignment) {
  const auto bytes = random_bytes(4096 + 64, 1);
  for (size_t size = 0; size <= 4096; ++size) {
    const size_t offset = size % 64;  // every alignment mod 64, over the lengths
    ASSERT_EQ(crc(bytes.data() + offset, size), zlib_crc(bytes.data() + offset, size)) << "length " << size
                                                                                         << " at offset " << offset;
  }
}

TEST_P(Crc32IeeeTest, EqualsZlibOnMegabytesAtRandomOffsetsAndStartingValues) {
  const auto bytes = random_bytes((size_t{4} << 20) + 256, 2);
  std::mt19937 rng(3);
  for (int i = 0; i < 12; ++i) {
    const size_t offset = rng() % 256;
    const size_t size = (size_t{1} << 20) + rng() % (size_t{3} << 20);
    const uint32_t start = i == 0 ? 0 : static_cast<uint32_t>(rng());
    ASSERT_EQ(crc(bytes.data() + offset, size, start), zlib_crc(bytes.data() + offset, size, start))
        << "length " << size << " at offset " << offset << " from " << start;
  }
}

TEST_P(Crc32IeeeTest, PiecesChainedGiveTheCrcOfTheWhole) {
  const auto bytes = random_bytes(200000, 4);
  const uint32_t whole = zlib_crc(bytes.data(), bytes.size());
  std::mt19937 rng(5);
  for (int round = 0; round < 20; ++round) {
    uint32_t chained = 0;
    for (size_t at = 0; at < bytes.size();) {
      // Pieces from empty to beyond the widest fold, so each path hands over to the next.
      const size_t piece = std::min<size_t>(bytes.size() - at, rng() % (round % 2 ? 70000 : 600));
      chained = crc(bytes.data() + at, piece, chained);
      at += piece;
    }
    ASSERT_EQ(chained, whole) << "round " << round;
  }
}

TEST_P(Crc32IeeeTest, KnownValues) {
  const std::string check = "123456789";
  EXPECT_EQ(crc(reinterpret_cast<const unsigned char*>(check.data()), check.size()), 0xCBF43926u);
  const std::vector<unsigned char> zeros(1 << 16, 0);
  EXPECT_EQ(crc(zeros.data(), zeros.size()), zlib_crc(zeros.data(), zeros.size()));
  const std::vector<unsigned char> ones(1 << 16, 0xFF);
  EXPECT_EQ(crc(ones.data(), ones.size()), zlib_crc(ones.data(), ones.size()));
  EXPECT_EQ(crc(nullptr, 0, 0x12345678u), 0x12345678u);
}

INSTANTIATE_TEST_SUITE_P(Methods, Crc32IeeeTest,
                         ::testing::Values(Crc32Method::kZlib, Crc32Method::kPclmul, Crc32Method::kVpclmulAvx512),
                         [](const ::testing::TestParamInfo<Crc32Method>& info) {
                           std::string name(crc32_method_name(info.param));
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(Crc32Ieee, UsesTheFastestMethodThisCpuHasAndEqualsZlib) {
  const Crc32Method in_use = crc32_method_in_use();
  EXPECT_TRUE(crc32_method_supported(in_use));
  if (crc32_method_supported(Crc32Method::kVpclmulAvx512)) EXPECT_EQ(in_use, Crc32Method::kVpclmulAvx512);
  else if (crc32_method_supported(Crc32Method::kPclmul)) EXPECT_EQ(in_use, Crc32Method::kPclmul);
  const auto bytes = random_bytes(100003, 6);
  EXPECT_EQ(crc32_ieee(bytes.data(), bytes.size()), zlib_crc(bytes.data(), bytes.size()));
  EXPECT_EQ(crc32_ieee(bytes.data() + 7, 5000, 42), zlib_crc(bytes.data() + 7, 5000, 42));
}

TEST(Crc32Ieee, CombinedCrcsOfTwoPiecesAreTheCrcOfTheWhole) {
  const auto bytes = random_bytes(300007, 7);
  for (size_t split : {size_t{0}, size_t{1}, size_t{15}, size_t{4096}, size_t{100000}, bytes.size()}) {
    const uint32_t a = crc32_ieee(bytes.data(), split);
    const uint32_t b = crc32_ieee(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(crc32_ieee_combine(a, b, bytes.size() - split), zlib_crc(bytes.data(), bytes.size())) << split;
  }
}

}  // namespace
}  // namespace mirrored::io
