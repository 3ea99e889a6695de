#include "mirrored/distribute/gradient_buckets.h"

#include <algorithm>
#include <map>

namespace mirrored::distribute {

std::vector<Bucket> plan_buckets(const nn::ParameterArena& arena, const BucketCaps& caps) {
  // Element range of each layer that has parameters (a layer's parameters are adjacent).
  std::map<size_t, std::pair<int64_t, int64_t>> layer_ranges;
  for (const auto& info : arena.infos()) {
    const int64_t end = info.offset + shape_numel(info.shape);
    auto [it, inserted] = layer_ranges.emplace(info.layer, std::make_pair(info.offset, end));
    if (!inserted) {
      it->second.first = std::min(it->second.first, info.offset);
      it->second.second = std::max(it->second.second, end);
    }
  }
  std::vector<Bucket> buckets;
  Bucket current;
  int64_t cap = caps.first_bucket_bytes;
  for (auto it = layer_ranges.rbegin(); it != layer_ranges.rend(); ++it) {
    const auto [begin, end] = it->second;
    if (current.layers.empty()) {
      current.begin = begin;
      current.end = end;
    } else {
      // Reverse layer order walks the arena backwards: each layer extends the bucket down.
      current.begin = std::min(current.begin, begin);
      current.end = std::max(current.end, end);
    }
    current.layers.push_back(it->first);
    if (current.numel() * static_cast<int64_t>(sizeof(float)) >= cap) {
      buckets.push_back(std::move(current));
      current = Bucket{};
      cap = caps.bucket_bytes;
    }
  }
  if (!current.layers.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace mirrored::distribute
