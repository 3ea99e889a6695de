#pragma once
// Decoded images and the two transforms the image importer applies to them: the channel
// conversion (gray <-> RGB) and the resize to a fixed size (the shorter side scaled to the
// target, then the centre cropped, like torchvision's Resize(min) + CenterCrop). Pixels are
// uint8, interleaved [H, W, C] as decoders write them; write_planar() gives the [C, H, W]
// layout of the datasets.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mirrored::data {

struct Image {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;         // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // height * width * channels, interleaved

  uint8_t at(int64_t y, int64_t x, int64_t c) const {
    return pixels[static_cast<size_t>((y * width + x) * channels + c)];
  }
};

// Gray -> RGB repeats the value; RGB -> gray is the ITU-R BT.601 luma
// (299 R + 587 G + 114 B) / 1000, rounded, the formula of PIL's convert("L") and of the Y
// plane of a JPEG. Same channel count: the image unchanged.
Image convert_channels(Image image, int64_t channels);

// The size the shorter side is scaled to `height` x `width` and before the centre crop:
// both sides at least the target, the aspect ratio kept (rounded to the nearest pixel).
struct ScaledSize {
  int64_t height = 0;
  int64_t width = 0;
};
ScaledSize scaled_size(int64_t from_height, int64_t from_width, int64_t height, int64_t width);

// Scales `image` so that it covers `height` x `width` (scaled_size) and crops the centre.
// Each axis is filtered on its own: a box (area) filter when it shrinks, each output pixel
// the coverage-weighted mean of the source pixels under it (a 2x reduction: the mean of
// 2x2 blocks); bilinear interpolation of pixel centres when it grows; a copy when its size
// is kept. Results round to nearest, halves up, so a constant image stays constant.
Image resize_and_crop(const Image& image, int64_t height, int64_t width);

// [H, W, C] interleaved -> [C, H, W] planar, written to `out` (height * width * channels bytes).
void write_planar(const Image& image, uint8_t* out);

}  // namespace mirrored::data
