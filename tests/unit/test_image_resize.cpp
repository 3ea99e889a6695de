// The image importer's resize (shorter side to the target, centre crop; area filter when
// shrinking, bilinear when growing) and channel conversion, on images small enough to
// work out by hand.
#include <gtest/gtest.h>

#include <array>
#include <numeric>

#include "mirrored/data/image_resize.h"

namespace mirrored::data {
namespace {

Image image_of(int64_t height, int64_t width, int64_t channels, std::vector<uint8_t> pixels) {
  return Image{height, width, channels, std::move(pixels)};
}

TEST(ImageResize, ScaledSizeCoversTheTargetKeepingTheAspectRatio) {
  EXPECT_EQ(scaled_size(256, 256, 224, 224).height, 224);
  const ScaledSize wide = scaled_size(300, 400, 224, 224);  // the shorter side (300) -> 224
  EXPECT_EQ(wide.height, 224);
  EXPECT_EQ(wide.width, 299);  // 400 * 224 / 300 = 298.67
  const ScaledSize tall = scaled_size(90, 30, 32, 32);
  EXPECT_EQ(tall.width, 32);
  EXPECT_EQ(tall.height, 96);
  const ScaledSize non_square = scaled_size(100, 100, 20, 40);  // both sides must cover
  EXPECT_EQ(non_square.height, 40);
  EXPECT_EQ(non_square.width, 40);
}

TEST(ImageResize, SameSizeIsACopy) {
  std::vector<uint8_t> pixels(5 * 7 * 3);
  std::iota(pixels.begin(), pixels.end(), uint8_t{0});
  const Image out = resize_and_crop(image_of(5, 7, 3, pixels), 5, 7);
  EXPECT_EQ(out.pixels, pixels);
}

TEST(ImageResize, CentreCropOfTheLongerSide) {
  // 2 x 6, target 2 x 2: no scaling, columns 2 and 3 kept.
  const Image out = resize_and_crop(image_of(2, 6, 1, {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}), 2, 2);
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{2, 3, 12, 13}));
}

TEST(ImageResize, HalvingIsTheMeanOfEach2x2Block) {
  // 4 x 4 -> 2 x 2; block means 2.5 (rounds up to 3), 6.0, 100.25 (100), 200.75 (201).
  const Image in = image_of(4, 4, 1, {1, 2, 5, 7,  //
                                      3, 4, 5, 7,  //
                                      100, 100, 200, 201, //
                                      101, 100, 201, 201});
  const Image out = resize_and_crop(in, 2, 2);
  EXPECT_EQ(out.height, 2);
  EXPECT_EQ(out.width, 2);
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{3, 6, 100, 201}));
}

TEST(ImageResize, AreaFilterWeightsPartialPixels) {
  // One row of 3 -> 2: output 0 covers source [0, 1.5): (a + b / 2) / 1.5; output 1 covers
  // [1.5, 3): (b / 2 + c) / 1.5. With 30, 60, 90: 40 and 80; the rows likewise (3 -> 2).
  const Image in = image_of(3, 3, 1, {30, 60, 90, 30, 60, 90, 30, 60, 90});
  const Image out = resize_and_crop(in, 2, 2);
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{40, 80, 40, 80}));
}

TEST(ImageResize, ConstantImagesStayConstant) {
  for (const auto& [h, w, th, tw] : {std::array<int64_t, 4>{17, 23, 5, 5}, {256, 256, 224, 224}, {3, 5, 11, 13},
                                     {9, 4, 7, 3}, {100, 37, 64, 64}}) {
    for (const uint8_t value : {uint8_t{0}, uint8_t{1}, uint8_t{128}, uint8_t{255}}) {
      const Image out = resize_and_crop(image_of(h, w, 3, std::vector<uint8_t>(static_cast<size_t>(h * w * 3), value)),
                                        th, tw);
      ASSERT_EQ(out.pixels.size(), static_cast<size_t>(th * tw * 3));
      for (const uint8_t p : out.pixels) ASSERT_EQ(p, value) << h << "x" << w << " -> " << th << "x" << tw;
    }
  }
}

TEST(ImageResize, BilinearWhenGrowing) {
  // 1 x 2 -> 2 x 4 (shorter side 1 -> 2): centres at source x = -0.25, 0.25, 0.75, 1.25,
  // clamped to [0, 1]: 0, 0.25, 0.75, 1 of the way from 0 to 200.
  const Image out = resize_and_crop(image_of(1, 2, 1, {0, 200}), 2, 4);
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{0, 50, 150, 200, 0, 50, 150, 200}));
}

TEST(ImageResize, PlanarLayout) {
  const Image in = image_of(1, 2, 3, {1, 2, 3, 4, 5, 6});
  std::vector<uint8_t> out(6);
  write_planar(in, out.data());
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 4, 2, 5, 3, 6}));
}

TEST(ImageChannels, GrayAndRgb) {
  const Image gray = convert_channels(image_of(1, 2, 3, {255, 0, 0, 10, 20, 30}), 1);
  // 0.299 * 255 = 76.245 -> 76; (2990 + 11740 + 3420) / 1000 = 18.15 -> 18.
  EXPECT_EQ(gray.pixels, (std::vector<uint8_t>{76, 18}));
  const Image rgb = convert_channels(image_of(1, 2, 1, {7, 9}), 3);
  EXPECT_EQ(rgb.pixels, (std::vector<uint8_t>{7, 7, 7, 9, 9, 9}));
  EXPECT_EQ(convert_channels(image_of(1, 1, 3, {1, 2, 3}), 3).pixels, (std::vector<uint8_t>{1, 2, 3}));
}

}  // namespace
}  // namespace mirrored::data
