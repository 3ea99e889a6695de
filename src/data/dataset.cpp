#include "mirrored/data/dataset.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

#include "mirrored/data/image_cache.h"

namespace mirrored::data {
namespace {

// pixel / 255 for every byte value, computed once: a lookup is cheaper than a divide and
// gives bit-identical results.
const std::array<float, 256>& pixel_scale() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i) / 255.0f;
    return t;
  }();
  return table;
}

}  // namespace

void assemble_batch(const Dataset& dataset, std::span<const int64_t> indices, Tensor& images,
                    Tensor& labels) {
  const auto n = static_cast<int64_t>(indices.size());
  const Shape& sample = dataset.sample_shape;
  const int64_t sample_numel = dataset.sample_numel();
  ensure_shape(images, {n, sample.at(0), sample.at(1), sample.at(2)}, DType::kF32);
  ensure_shape(labels, {n}, DType::kI32);

  // Bytes through a table (pixel / 255 by default, the bits of earlier versions), floats
  // divided by 255 or multiplied by the file's scale.
  std::array<float, 256> byte_table = pixel_scale();
  if (dataset.pixel_scale)
    for (size_t i = 0; i < byte_table.size(); ++i) byte_table[i] = static_cast<float>(i) * *dataset.pixel_scale;
  const bool floats = dataset.cache ? dataset.cache->floats() : !dataset.float_images.empty();
  float* image_out = images.data<float>();
  int32_t* label_out = labels.data<int32_t>();
  // Cached samples are visited in file order, so the rows that share a block are read
  // together and each block is read once per batch; the rows land where they belong.
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  if (dataset.cache)
    std::stable_sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) {
      return indices[static_cast<size_t>(a)] < indices[static_cast<size_t>(b)];
    });
  for (const int64_t row : rows) {
    const int64_t index = indices[static_cast<size_t>(row)];
    MIRRORED_CHECK(index >= 0 && index < dataset.size, "sample index ", index,
                   " outside dataset '", dataset.source, "' of ", dataset.size, " samples");
    float* out = image_out + row * sample_numel;
    // A cached sample's block stays alive (held here) while its pixels are converted.
    ImageCache::Sample cached;
    if (dataset.cache) cached = dataset.cache->sample(index);
    if (floats) {
      const float* pixels = cached.block ? cached.block->as<float>() + cached.offset
                                         : dataset.float_images.data() + index * sample_numel;
      if (dataset.pixel_scale) {
        for (int64_t k = 0; k < sample_numel; ++k) out[k] = pixels[k] * *dataset.pixel_scale;
      } else {
        for (int64_t k = 0; k < sample_numel; ++k) out[k] = pixels[k] / 255.0f;
      }
    } else {
      const uint8_t* pixels = cached.block ? cached.block->as<uint8_t>() + cached.offset
                                           : dataset.images.data() + index * sample_numel;
      for (int64_t k = 0; k < sample_numel; ++k) out[k] = byte_table[pixels[k]];
    }
    label_out[row] = dataset.labels[static_cast<size_t>(index)];
  }
}

}  // namespace mirrored::data
