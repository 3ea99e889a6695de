#include "mirrored/distribute/batch_plan.h"

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::distribute {

const char* reduction_name(Reduction mode) { return mode == Reduction::kInvariant ? "invariant" : "fast"; }

int64_t default_virtual_replicas(int64_t global_batch, int world) {
  MIRRORED_CHECK(global_batch >= 1 && world >= 1, "default_virtual_replicas(", global_batch, ", ", world, ")");
  if (world > 8) {
    for (int64_t d = world; d <= global_batch; ++d)
      if (global_batch % d == 0) return d;
    return global_batch;  // more ranks than samples: make() names the problem
  }
  for (int64_t d = 8; d > 1; --d)
    if (global_batch % d == 0) return d;
  return 1;
}

BatchPlan BatchPlan::make(int64_t global_batch, int world, const ReductionOptions& reduction) {
  MIRRORED_CHECK(world >= 1, "a world of ", world, " ranks");
  if (global_batch <= 0)
    throw InputError(str_cat("batch_size = ", global_batch, ": expected a positive global batch"), ExitCode::kUsage);
  if (reduction.mode == Reduction::kFast) {
    if (reduction.uneven_shares) {
      if (global_batch < world)
        throw InputError(str_cat("batch_size = ", global_batch, " is smaller than the ", world,
                                 " replicas: every replica needs at least one sample"),
                         ExitCode::kUsage);
      return BatchPlan(Reduction::kFast, global_batch, global_batch % world == 0 ? world : global_batch, world);
    }
    data::even_share(global_batch, 0, world);  // the divisibility error
    return BatchPlan(Reduction::kFast, global_batch, world, world);
  }
  const int64_t groups =
      reduction.shards > 0 ? reduction.shards : default_virtual_replicas(global_batch, world);
  if (reduction.shards < 0)
    throw InputError(str_cat("reduction.shards = ", reduction.shards,
                             ": expected a positive number of virtual replicas (or 0 for the default)"),
                     ExitCode::kUsage);
  if (global_batch % groups != 0)
    throw InputError(str_cat("reduction.shards = ", groups, " does not divide batch_size (global) ", global_batch,
                             ": every virtual replica computes the same number of samples; choose a divisor of ",
                             global_batch),
                     ExitCode::kUsage);
  if (groups < world)
    throw InputError(str_cat("reduction = invariant with ", groups, " virtual replicas (reduction.shards) cannot run on ",
                             world, " ranks: each rank needs at least one; raise reduction.shards to a divisor of ",
                             global_batch, " of at least ", world),
                     ExitCode::kUsage);
  return BatchPlan(Reduction::kInvariant, global_batch, groups, world);
}

BatchPlan BatchPlan::replan(int world) const {
  MIRRORED_CHECK(world >= 1, "a world of ", world, " ranks");
  if (mode_ == Reduction::kInvariant) {
    MIRRORED_CHECK(world <= groups_, world, " ranks for ", groups_, " virtual replicas");
    return BatchPlan(mode_, global_batch_, groups_, world);
  }
  MIRRORED_CHECK(world <= global_batch_, world, " ranks for a global batch of ", global_batch_);
  return BatchPlan(mode_, global_batch_, global_batch_ % world == 0 ? world : global_batch_, world);
}

data::IndexRange BatchPlan::groups_of(int rank) const { return data::balanced_share(groups_, rank, world_); }

data::IndexRange BatchPlan::samples_of(int rank) const {
  const data::IndexRange groups = groups_of(rank);
  return data::IndexRange{groups.begin * group_size(), groups.end * group_size()};
}

float BatchPlan::share_weight(int rank) const {
  if (mode_ == Reduction::kInvariant) return 1.0f;
  // Even shares: world x (batch / world) / batch, exactly 1 in integers first.
  const int64_t weighted = static_cast<int64_t>(world_) * samples_of(rank).size();
  return weighted == global_batch_ ? 1.0f
                                   : static_cast<float>(static_cast<double>(weighted) /
                                                        static_cast<double>(global_batch_));
}

std::string BatchPlan::describe() const {
  const int64_t fewest = groups_ / world_, most = fewest + (groups_ % world_ != 0 ? 1 : 0);
  return str_cat(groups_, " virtual replica(s) of ", group_size(), " sample(s), ",
                 fewest == most ? str_cat(fewest) : str_cat(fewest, " or ", most), " per rank");
}

}  // namespace mirrored::distribute
