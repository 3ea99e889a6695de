#include "pixel_checks.h"

#include <algorithm>
#include <cmath>

#include "mirrored/core/error.h"

namespace mirrored::data::detail {
namespace {

constexpr const char* kImages = "/images";

InputError problem(const std::string& path, const std::string& what) {
  return InputError(str_cat("'", path, "': ", what));
}

}  // namespace

void narrow_integer_pixels(const int64_t* wide, int64_t count, int64_t first_element, int64_t sample_numel,
                           const std::string& path, uint8_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (wide[i] < 0 || wide[i] > 255) {
      throw problem(path, str_cat(kImages, " value ", wide[i], " at sample ", (first_element + i) / sample_numel,
                                  " is outside the pixel range [0, 255]"));
    }
    out[i] = static_cast<uint8_t>(wide[i]);
  }
}

void FloatPixelCheck::check(const float* values, int64_t count, int64_t first_element) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = values[i];
    const int64_t sample = (first_element + i) / sample_numel_;
    if (std::isnan(v)) throw problem(path_, str_cat(kImages, " contains NaN at sample ", sample));
    if (scaled_) {
      if (!std::isfinite(v))
        throw problem(path_, str_cat(kImages, " value ", v, " at sample ", sample, " is not finite"));
      continue;
    }
    if (!(v >= 0.0f && v <= 255.0f)) {
      throw problem(path_, str_cat(kImages, " value ", v, " at sample ", sample,
                                   " is outside the pixel range [0, 255] (set the root attribute "
                                   "pixel_scale to train on other float values as stored, times it)"));
    }
    fractional_ = fractional_ || v != std::floor(v);
    largest_ = std::max(largest_, v);
  }
}

void FloatPixelCheck::finish() const {
  if (!scaled_ && fractional_ && largest_ <= 1.0f) {
    throw problem(path_, str_cat(kImages, " holds floats in [0, 1], which looks normalised;"
                                          " expected raw pixel values in [0, 255], or set the root "
                                          "attribute pixel_scale = 1 to use them as stored"));
  }
}

}  // namespace mirrored::data::detail
