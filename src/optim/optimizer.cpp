#include "mirrored/optim/optimizer.h"

#include "mirrored/core/error.h"

namespace mirrored::optim {

Optimizer::Optimizer(nn::ParameterArena& arena, float weight_decay, ArenaRange shard)
    : arena_(arena), shard_(shard) {
  MIRRORED_CHECK(arena.allocated(), "an optimizer needs an allocated parameter arena");
  MIRRORED_CHECK(shard.begin >= 0 && shard.begin <= shard.end && shard.end <= arena.numel(), "optimizer shard [",
                 shard.begin, ", ", shard.end, ") of an arena of ", arena.numel(), " elements");
  ranges_ = intersect(update_ranges(arena, weight_decay), shard);
}

int64_t Optimizer::state_bytes() {
  int64_t bytes = 0;
  for (const auto& entry : state()) bytes += entry.second->numel() * static_cast<int64_t>(sizeof(float));
  return bytes;
}

Tensor Optimizer::shard_state() const {
  return Tensor({shard_.numel()}, DType::kF32, arena_.flat_params().device());
}

Tensor Optimizer::params_of(const UpdateRange& r) const {
  return arena_.flat_params().view(r.range.begin, {r.range.numel()});
}

Tensor Optimizer::grads_of(const UpdateRange& r) const {
  return arena_.flat_grads().view(r.range.begin, {r.range.numel()});
}

Tensor Optimizer::state_of(const Tensor& state, const UpdateRange& r) const {
  return state.view(r.range.begin - shard_.begin, {r.range.numel()});
}

}  // namespace mirrored::optim
