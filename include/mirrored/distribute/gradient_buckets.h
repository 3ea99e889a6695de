#pragma once
// Gradient buckets: contiguous ranges of the flat gradient buffer, formed in reverse layer
// order (the order backward produces gradients) and capped in size, so each can be
// all-reduced as soon as backward has filled it. The layout is a pure function of the
// model and the caps, hence the same on every rank.
#include <cstdint>
#include <vector>

#include "mirrored/nn/parameter_arena.h"

namespace mirrored::distribute {

struct Bucket {
  int64_t begin = 0;            // elements into the flat gradient buffer
  int64_t end = 0;
  std::vector<size_t> layers;   // layers with parameters in this bucket, last layer first
  int64_t numel() const { return end - begin; }
};

struct BucketCaps {
  int64_t first_bucket_bytes = int64_t{1} << 20;  // small, so communication starts early
  int64_t bucket_bytes = int64_t{25} << 20;
};

// A layer's parameters are never split: a bucket closes once it reaches its cap.
std::vector<Bucket> plan_buckets(const nn::ParameterArena& arena, const BucketCaps& caps);

}  // namespace mirrored::distribute
