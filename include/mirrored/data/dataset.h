#pragma once
// Labelled images held in memory as stored (uint8), converted to float per batch.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::data {

struct Dataset {
  std::string source;          // the file it came from, for messages
  int64_t size = 0;            // number of samples
  Shape sample_shape;          // [C, H, W]
  int num_classes = 10;
  std::vector<uint8_t> images; // size * C*H*W, row-major
  std::vector<uint8_t> labels; // size, each in [0, num_classes)

  int64_t sample_numel() const { return shape_numel(sample_shape); }
};

// Fills `images` [n, C, H, W] float32 (pixel / 255) and `labels` [n] int32 with the samples
// at `indices`, reusing the tensors' storage when it is large enough.
void assemble_batch(const Dataset& dataset, std::span<const int64_t> indices, Tensor& images,
                    Tensor& labels);

}  // namespace mirrored::data
