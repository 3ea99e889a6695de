#include "mirrored/data/augment.h"

#include <algorithm>
#include <cstring>

#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"

namespace mirrored::data {
namespace {
// Streams no other user of the seed draws from (the weights use 1, the data order 1000 + epoch).
constexpr uint64_t kAugmentStream = uint64_t{0xA5} << 56;
}  // namespace

AugmentDraw augment_draw(const AugmentOptions& options, uint64_t seed, int64_t epoch, int64_t sample_index) {
  Rng rng(seed ^ (static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ull),
          kAugmentStream + static_cast<uint64_t>(sample_index));
  AugmentDraw draw;
  if (options.flip) draw.flip = rng.below(2) == 1;
  if (options.crop_padding > 0) {
    const auto span = static_cast<uint64_t>(2 * options.crop_padding + 1);
    draw.dy = static_cast<int64_t>(rng.below(span)) - options.crop_padding;
    draw.dx = static_cast<int64_t>(rng.below(span)) - options.crop_padding;
  }
  return draw;
}

void Augmenter::apply(Tensor& images, std::span<const int64_t> sample_indices, int64_t epoch) {
  if (!options_.enabled()) return;
  MIRRORED_CHECK(images.rank() == 4 && images.device().is_cpu() && images.dtype() == DType::kF32 &&
                     images.dim(0) == static_cast<int64_t>(sample_indices.size()),
                 "augment: expected host float32 [n, C, H, W] for ", sample_indices.size(), " samples, got ",
                 shape_str(images.shape()));
  const int64_t planes = images.dim(1), h = images.dim(2), w = images.dim(3);
  const int64_t sample_numel = planes * h * w;
  scratch_.resize(static_cast<size_t>(sample_numel));
  float* data = images.data<float>();
  for (size_t i = 0; i < sample_indices.size(); ++i) {
    const AugmentDraw d = augment_draw(options_, seed_, epoch, sample_indices[i]);
    if (!d.flip && d.dy == 0 && d.dx == 0) continue;
    float* sample = data + static_cast<int64_t>(i) * sample_numel;
    std::memcpy(scratch_.data(), sample, static_cast<size_t>(sample_numel) * sizeof(float));
    std::fill(sample, sample + sample_numel, 0.0f);
    // Output columns whose source column x + dx lies inside the image.
    const int64_t x_lo = std::max<int64_t>(0, -d.dx), x_hi = std::min(w, w - d.dx);
    for (int64_t c = 0; c < planes; ++c) {
      for (int64_t y = 0; y < h; ++y) {
        const int64_t sy = y + d.dy;
        if (sy < 0 || sy >= h) continue;
        const float* src = scratch_.data() + (c * h + sy) * w;
        float* dst = sample + (c * h + y) * w;
        // Mirroring is applied after the shift: output x takes shifted column w - 1 - x.
        for (int64_t x = x_lo; x < x_hi; ++x) (d.flip ? dst[w - 1 - x] : dst[x]) = src[x + d.dx];
      }
    }
  }
}

}  // namespace mirrored::data
