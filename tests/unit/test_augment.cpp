#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/data/augment.h"

using namespace mirrored;
using mirrored::data::AugmentDraw;
using mirrored::data::Augmenter;
using mirrored::data::AugmentOptions;

namespace {
constexpr int64_t kC = 2, kH = 5, kW = 6;

// Sample i's pixel (c, y, x) holds a value unique over the batch, never 0.
Tensor numbered_batch(int64_t n) {
  Tensor images({n, kC, kH, kW}, DType::kF32);
  float* p = images.data<float>();
  for (int64_t i = 0; i < images.numel(); ++i) p[i] = static_cast<float>(i + 1);
  return images;
}

// The transform written out by hand: shift by (dy, dx), zero fill, then mirror.
float expected_pixel(const Tensor& original, int64_t i, int64_t c, int64_t y, int64_t x, const AugmentDraw& d) {
  const int64_t shifted_x = d.flip ? kW - 1 - x : x;
  const int64_t sy = y + d.dy, sx = shifted_x + d.dx;
  if (sy < 0 || sy >= kH || sx < 0 || sx >= kW) return 0.0f;
  return original.data<float>()[((i * kC + c) * kH + sy) * kW + sx];
}
}  // namespace

TEST(Augment, EachSampleIsItsDrawnFlipAndShift) {
  const AugmentOptions options{.flip = true, .crop_padding = 2};
  const Tensor original = numbered_batch(16);
  Tensor images = numbered_batch(16);
  const std::vector<int64_t> indices = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43, 38 + 100, 327, 950};
  Augmenter(options, /*seed=*/5).apply(images, indices, /*epoch=*/2);
  std::set<std::tuple<bool, int64_t, int64_t>> seen;
  for (int64_t i = 0; i < 16; ++i) {
    const AugmentDraw d = data::augment_draw(options, 5, 2, indices[static_cast<size_t>(i)]);
    EXPECT_TRUE(d.dy >= -2 && d.dy <= 2 && d.dx >= -2 && d.dx <= 2) << d.dy << " " << d.dx;
    seen.insert({d.flip, d.dy, d.dx});
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t y = 0; y < kH; ++y)
        for (int64_t x = 0; x < kW; ++x)
          ASSERT_EQ(images.data<float>()[((i * kC + c) * kH + y) * kW + x], expected_pixel(original, i, c, y, x, d))
              << "sample " << i << " pixel " << c << "," << y << "," << x;
  }
  EXPECT_GT(seen.size(), 8u) << "16 samples should not share a handful of transforms";
}

TEST(Augment, MirrorAloneReversesRows) {
  const AugmentOptions options{.flip = true};
  Tensor images = numbered_batch(40);
  std::vector<int64_t> indices(40);
  for (int64_t i = 0; i < 40; ++i) indices[static_cast<size_t>(i)] = i;
  Augmenter(options, 1).apply(images, indices, 0);
  const Tensor original = numbered_batch(40);
  int flipped = 0;
  for (int64_t i = 0; i < 40; ++i) {
    const bool flip = data::augment_draw(options, 1, 0, i).flip;
    flipped += flip;
    const float* row = images.data<float>() + i * kC * kH * kW;
    const float* before = original.data<float>() + i * kC * kH * kW;
    for (int64_t x = 0; x < kW; ++x) EXPECT_EQ(row[x], before[flip ? kW - 1 - x : x]);
  }
  EXPECT_GT(flipped, 8);  // p = 1/2 over 40 samples: 8 or fewer happens with probability < 1e-4
  EXPECT_LT(flipped, 32);
}

TEST(Augment, DependsOnSampleAndEpochNotOnTheBatchItIsIn) {
  const AugmentOptions options{.flip = true, .crop_padding = 3};
  Tensor together = numbered_batch(2);
  Augmenter augmenter(options, 9);
  augmenter.apply(together, std::vector<int64_t>{7, 1234}, 4);
  // Sample 1234 alone, in a batch of its own (as on another replica), same pixels.
  Tensor alone({1, kC, kH, kW}, DType::kF32);
  const int64_t numel = kC * kH * kW;
  for (int64_t k = 0; k < numel; ++k) alone.data<float>()[k] = numbered_batch(2).data<float>()[numel + k];
  augmenter.apply(alone, std::vector<int64_t>{1234}, 4);
  for (int64_t k = 0; k < numel; ++k) ASSERT_EQ(alone.data<float>()[k], together.data<float>()[numel + k]) << k;
  // Another epoch draws again.
  int differing = 0;
  for (int64_t sample = 0; sample < 50; ++sample) {
    const auto a = data::augment_draw(options, 9, 4, sample), b = data::augment_draw(options, 9, 5, sample);
    differing += a.flip != b.flip || a.dx != b.dx || a.dy != b.dy;
  }
  EXPECT_GT(differing, 40);
}

TEST(Augment, DisabledLeavesImagesAlone) {
  Tensor images = numbered_batch(3);
  Augmenter(AugmentOptions{}, 1).apply(images, std::vector<int64_t>{0, 1, 2}, 0);
  const Tensor original = numbered_batch(3);
  for (int64_t k = 0; k < images.numel(); ++k) EXPECT_EQ(images.data<float>()[k], original.data<float>()[k]);
}

TEST(Augment, RejectsABatchThatDoesNotMatchItsIndices) {
  Tensor images = numbered_batch(3);
  EXPECT_THROW(Augmenter({.flip = true}, 1).apply(images, std::vector<int64_t>{0, 1}, 0), Error);
}
