#pragma once
// Training-time augmentation of image batches on the host, as torchvision's
// RandomHorizontalFlip and RandomCrop(padding = p) or Keras' RandomFlip("horizontal") and
// RandomTranslation do. Each sample's transform is drawn from its own random stream,
// keyed by (seed, epoch, dataset index): the same sample in the same epoch is transformed
// the same way whichever replica holds it and however the global batch is split, so
// augmentation keeps mirrored's world-size contract.
#include <cstdint>
#include <span>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::data {

struct AugmentOptions {
  bool flip = false;          // mirror left-right with probability 1/2
  int64_t crop_padding = 0;   // shift by up to this many pixels each way, zeros filling in
  bool enabled() const { return flip || crop_padding > 0; }
};

// One sample's draw: whether it is mirrored and where the crop window sits.
struct AugmentDraw {
  bool flip = false;
  // Shift: pixel (y, x) takes input (y + dy, x + dx), each in [-p, p]; mirroring follows.
  int64_t dy = 0, dx = 0;
};
AugmentDraw augment_draw(const AugmentOptions& options, uint64_t seed, int64_t epoch, int64_t sample_index);

class Augmenter {
 public:
  explicit Augmenter(AugmentOptions options, uint64_t seed) : options_(options), seed_(seed) {}
  const AugmentOptions& options() const { return options_; }
  // Transforms `images` [n, C, H, W] (host float32) in place; sample_indices[i] is the
  // dataset index of row i. Uses a scratch buffer kept between calls.
  void apply(Tensor& images, std::span<const int64_t> sample_indices, int64_t epoch);

 private:
  AugmentOptions options_;
  uint64_t seed_;
  std::vector<float> scratch_;
};

}  // namespace mirrored::data
