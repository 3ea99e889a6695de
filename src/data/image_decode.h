#pragma once
// Private to data/: JPEG (TurboJPEG) and PNG (libpng's simplified API) decoded from memory
// to 8-bit gray or RGB. The format comes from the bytes' signature, not the file name. The
// declared size is checked before any pixel memory is allocated: a file of a few bytes may
// claim a 60000 x 60000 image.
#include <cstdint>
#include <span>
#include <string>

#include "mirrored/data/image_resize.h"

namespace mirrored::data::detail {

// Larger declared images are refused (a 64-megapixel bound holds every camera's photos).
inline constexpr int64_t kMaxImageSide = int64_t{1} << 15;
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
};

// The size the file declares; false with `why` set when it is not a readable JPEG or PNG
// header or the size is out of bounds.
bool read_image_size(std::span<const uint8_t> bytes, ImageSize& size, std::string& why);

// Decodes to `channels` (1 or 3; gray and RGB files are converted). A JPEG larger than
// `at_least` on both sides is decoded at the smallest of TurboJPEG's scales (n/8) that still
// covers it (scaled_size of the target), the DCT doing most of the reduction; 0 x 0: full
// size. Warnings (a truncated or corrupt stream) are failures: false with `why` set.
bool decode_image(std::span<const uint8_t> bytes, int64_t channels, ImageSize at_least, Image& image,
                  std::string& why);

}  // namespace mirrored::data::detail
