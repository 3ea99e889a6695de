#include "mirrored/elastic/shard_recovery.h"

#include <algorithm>
#include <set>

#include "mirrored/core/error.h"

namespace mirrored::elastic {

ShardHolders choose_shard_holders(const std::vector<std::vector<HeldPiece>>& held, int shards) {
  ShardHolders choice;
  std::set<int64_t, std::greater<>> steps;
  std::vector<bool> any(static_cast<size_t>(shards), false);
  for (const auto& pieces : held)
    for (const HeldPiece& piece : pieces) {
      MIRRORED_CHECK(piece.shard >= 0 && piece.shard < shards, "a copy of shard ", piece.shard, " of ", shards);
      steps.insert(piece.step);
      any[static_cast<size_t>(piece.shard)] = true;
    }
  for (int shard = 0; shard < shards; ++shard)
    if (!any[static_cast<size_t>(shard)]) choice.lost_shards.push_back(shard);
  if (!choice.lost_shards.empty()) return choice;
  for (const int64_t step : steps) {  // newest first
    std::vector<int> holder(static_cast<size_t>(shards), -1);
    for (size_t survivor = 0; survivor < held.size(); ++survivor)
      for (const HeldPiece& piece : held[survivor])
        if (piece.step == step && holder[static_cast<size_t>(piece.shard)] < 0)
          holder[static_cast<size_t>(piece.shard)] = static_cast<int>(survivor);
    if (std::find(holder.begin(), holder.end(), -1) == holder.end()) {
      choice.step = step;
      choice.holder = std::move(holder);
      return choice;
    }
  }
  return choice;  // every shard survives, but at no one step: step -1
}

StateAssembly::StateAssembly(const distribute::ShardPlan& plan, int state_tensors)
    : plan_(plan),
      params_(static_cast<size_t>(plan.numel())),
      state_(static_cast<size_t>(state_tensors), std::vector<float>(static_cast<size_t>(plan.numel()))),
      placed_(static_cast<size_t>(plan.replicas()), false) {}

size_t StateAssembly::piece_floats(int shard) const {
  return distribute::shard_piece_floats(plan_, shard, state_.size());
}

void StateAssembly::place(int shard, const std::vector<float>& values) {
  MIRRORED_CHECK(shard >= 0 && shard < plan_.replicas() && values.size() == piece_floats(shard), "a piece of ",
                 values.size(), " floats for shard ", shard, " of ", plan_.replicas(), " (", piece_floats(shard),
                 " expected)");
  const optim::ArenaRange range = plan_.shard(shard);
  auto from = values.begin();
  const auto take = [&](std::vector<float>& into) {
    std::copy_n(from, range.numel(), into.begin() + range.begin);
    from += range.numel();
  };
  take(params_);
  for (auto& tensor : state_) take(tensor);
  placed_[static_cast<size_t>(shard)] = true;
}

bool StateAssembly::complete() const { return std::all_of(placed_.begin(), placed_.end(), [](bool b) { return b; }); }

}  // namespace mirrored::elastic
