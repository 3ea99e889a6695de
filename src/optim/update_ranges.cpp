#include "mirrored/optim/update_ranges.h"

#include <algorithm>

#include "mirrored/core/error.h"

namespace mirrored::optim {

bool decays(const nn::ParameterInfo& info) { return info.shape.size() >= 2; }

std::vector<UpdateRange> update_ranges(const nn::ParameterArena& arena, float weight_decay) {
  std::vector<const nn::ParameterInfo*> infos;
  for (const auto& info : arena.infos()) infos.push_back(&info);
  std::sort(infos.begin(), infos.end(), [](const auto* a, const auto* b) { return a->offset < b->offset; });
  std::vector<UpdateRange> ranges;
  for (const auto* info : infos) {
    const float decay = decays(*info) ? weight_decay : 0.0f;
    const ArenaRange range{info->offset, info->offset + shape_numel(info->shape)};
    if (range.numel() == 0) continue;
    if (!ranges.empty() && ranges.back().range.end == range.begin && ranges.back().weight_decay == decay) {
      ranges.back().range.end = range.end;
    } else {
      ranges.push_back({range, decay});
    }
  }
  return ranges;
}

std::vector<UpdateRange> intersect(const std::vector<UpdateRange>& ranges, ArenaRange shard) {
  std::vector<UpdateRange> out;
  for (const auto& r : ranges) {
    const ArenaRange part{std::max(r.range.begin, shard.begin), std::min(r.range.end, shard.end)};
    if (part.numel() > 0) out.push_back({part, r.weight_decay});
  }
  return out;
}

}  // namespace mirrored::optim
