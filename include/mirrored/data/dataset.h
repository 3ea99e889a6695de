#pragma once
// Labelled images, converted to float per batch: model input = pixel * pixel_scale, by
// default pixel / 255. The pixels are held in memory as stored (uint8 bytes, or float32
// values), or, for a file larger than its memory budget, read on demand through a bounded
// block cache (image_cache.h); labels are always in memory.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::data {

class ImageCache;

struct Dataset {
  std::string source;          // the file it came from, for messages
  int64_t size = 0;            // number of samples
  Shape sample_shape;          // [C, H, W]
  int num_classes = 10;
  // The names of labels 0..num_classes-1 when the file keeps them (root attribute
  // class_names, a JSON array of strings; data import-images writes it), else empty.
  std::vector<std::string> class_names;
  std::vector<uint8_t> images; // size * C*H*W, row-major (uint8 pixels; empty for float ones)
  std::vector<float> float_images;  // the same for float32 pixels (then `images` is empty)
  // Set when the pixels are read on demand instead (then `images` and `float_images` are
  // both empty); shared by copies of the Dataset, and safe to read from several threads.
  std::shared_ptr<ImageCache> cache;
  std::vector<uint8_t> labels; // size, each in [0, num_classes)
  // Model input = pixel * pixel_scale; unset: pixel / 255 (the file's root attribute
  // pixel_scale sets it).
  std::optional<float> pixel_scale;

  int64_t sample_numel() const { return shape_numel(sample_shape); }
  bool in_memory() const { return cache == nullptr; }
};

// Fills `images` [n, C, H, W] float32 (pixel / 255, or pixel * pixel_scale) and `labels` [n] int32 with the samples
// at `indices`, reusing the tensors' storage when it is large enough.
void assemble_batch(const Dataset& dataset, std::span<const int64_t> indices, Tensor& images,
                    Tensor& labels);

}  // namespace mirrored::data
