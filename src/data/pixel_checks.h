#pragma once
// Private to data/: the checks an image file's pixels pass, shared by the reader that loads
// the whole file and the block cache that reads it in pieces, so both refuse the same files
// with the same messages. Element positions are counted from the file's first pixel.
#include <cstdint>
#include <string>

namespace mirrored::data::detail {

// Narrows integer pixels to bytes; a value outside [0, 255] is an InputError naming the
// file and the sample (HDF5's own conversion would silently clamp 300 to 255).
void narrow_integer_pixels(const int64_t* wide, int64_t count, int64_t first_element, int64_t sample_numel,
                           const std::string& path, uint8_t* out);

// Float pixels, fed in order block by block. With a pixel_scale they may be any finite
// values; without one they are pixel values in [0, 255], and a file whose values are all
// fractional in [0, 1] looks normalised and is refused by finish().
class FloatPixelCheck {
 public:
  FloatPixelCheck(const std::string& path, int64_t sample_numel, bool scaled)
      : path_(path), sample_numel_(sample_numel), scaled_(scaled) {}
  void check(const float* values, int64_t count, int64_t first_element);
  void finish() const;

 private:
  std::string path_;
  int64_t sample_numel_;
  bool scaled_;
  bool fractional_ = false;
  float largest_ = 0.0f;
};

}  // namespace mirrored::data::detail
