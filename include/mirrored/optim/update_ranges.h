#pragma once
// Which parts of the flat parameter arena an optimizer updates, and with which weight decay.
//
// Parameter groups (PyTorch's convention, as in nanoGPT's configure_optimizers): weight
// decay applies to tensors with two or more dimensions (dense and convolution weights,
// embeddings) and never to one-dimensional ones (biases, norm gains and shifts). Adjacent
// parameters with the same decay merge into one range, so a model of alternating weights
// and biases costs two kernel launches per layer, not one per element.
//
// Sharding (ZeRO stage 1, distribute/shard_plan.h): a replica's optimizer updates the
// ranges intersected with its shard of the arena and keeps state for its shard alone.
#include <cstdint>
#include <vector>

#include "mirrored/nn/parameter_arena.h"

namespace mirrored::optim {

// [begin, end) in elements of the flat arena.
struct ArenaRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t numel() const { return end - begin; }
  bool operator==(const ArenaRange&) const = default;
};

struct UpdateRange {
  ArenaRange range;
  float weight_decay = 0.0f;
};

// True for the parameters weight decay applies to (>= 2 dimensions).
bool decays(const nn::ParameterInfo& info);

// The arena as ranges in offset order, `weight_decay` on those decays() accepts and 0 on
// the others; adjacent ranges with equal decay merged.
std::vector<UpdateRange> update_ranges(const nn::ParameterArena& arena, float weight_decay);

// The parts of `ranges` inside `shard` (empty ranges dropped).
std::vector<UpdateRange> intersect(const std::vector<UpdateRange>& ranges, ArenaRange shard);

}  // namespace mirrored::optim
