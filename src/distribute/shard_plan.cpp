#include "mirrored/distribute/shard_plan.h"

#include <algorithm>

#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/core/error.h"
#include "mirrored/core/host_copy.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {
namespace {
// Host buffers go over any communicator; device buffers need one that takes them (NCCL's,
// which orders itself after the compute stream).
void require_reachable(const Tensor& values, const comm::Communicator& comm, const char* what) {
  MIRRORED_CHECK(values.device().is_cpu() || comm.capabilities().device_buffers, what, " of tensors on ",
                 values.device().str(), " needs a communicator that takes device buffers, not '", comm.backend(),
                 "'");
}

// Rank `rank`'s piece of `numel` elements cut into `replicas` contiguous pieces whose
// sizes differ by at most one.
optim::ArenaRange balanced(int64_t numel, int rank, int replicas) {
  return {numel * rank / replicas, numel * (rank + 1) / replicas};
}

void require_world(const ShardPlan& plan, const comm::Communicator& comm) {
  MIRRORED_CHECK(comm.size() == plan.replicas(), "a shard plan for ", plan.replicas(), " replicas used over ",
                 comm.size(), " ranks");
}
}  // namespace

ShardPlan ShardPlan::make(int64_t numel, int replicas, bool shard) {
  MIRRORED_CHECK(numel >= 0 && replicas >= 1, "shard plan of ", numel, " elements over ", replicas, " replicas");
  ShardPlan plan;
  plan.numel_ = numel;
  plan.replicas_ = replicas;
  plan.requested_ = shard;
  plan.sharded_ = shard && replicas > 1;
  for (int r = 0; r < (plan.sharded_ ? replicas : 1); ++r)
    plan.counts_.push_back(static_cast<size_t>(balanced(numel, r, plan.sharded_ ? replicas : 1).numel()));
  return plan;
}

optim::ArenaRange ShardPlan::shard(int rank) const {
  MIRRORED_CHECK(rank >= 0 && rank < replicas_, "shard of rank ", rank, " in a plan for ", replicas_, " replicas");
  return sharded_ ? balanced(numel_, rank, replicas_) : optim::ArenaRange{0, numel_};
}

std::vector<int64_t> ShardPlan::bounds() const {
  std::vector<int64_t> out;
  for (const size_t offset : comm::piece_offsets(counts_, static_cast<int>(counts_.size()), "shard plan"))
    out.push_back(static_cast<int64_t>(offset));
  return out;
}

void ShardPlan::sum_over_shards(Tensor& values, comm::Communicator& comm) const {
  if (!sharded_) return;
  require_world(*this, comm);
  require_reachable(values, comm, "sum over shards");
  comm.allreduce(values.data<float>(), static_cast<size_t>(values.numel()), comm::ReduceOp::kSum);
}

void ShardPlan::any_over_shards(Tensor& flag, comm::Communicator& comm) const {
  if (!sharded_) return;
  require_world(*this, comm);
  require_reachable(flag, comm, "flag agreement over shards");
  comm.allreduce(flag.data<int32_t>(), static_cast<size_t>(flag.numel()), comm::ReduceOp::kMax);
}

void ShardPlan::all_gather(Tensor& flat, comm::Communicator& comm) const {
  if (!sharded_) return;
  require_world(*this, comm);
  require_reachable(flat, comm, "parameter all-gather");
  MIRRORED_CHECK(flat.numel() == numel_, "all-gather of ", flat.numel(), " elements by a plan of ", numel_);
  // The polling wait: a rank spinning in MPI_Wait for a slower peer takes the core that
  // peer needs where ranks share cores.
  const comm::CallSite site("parameter all-gather");
  comm.allgather_inplace_async(flat.data<float>(), counts_, comm::DataType::kF32)
      ->wait(comm::Work::Clock::time_point::max());
}

std::vector<float> ShardPlan::gather_to_chief(const Tensor& shard_state, comm::Communicator& comm) const {
  std::vector<float> logical;
  gather_to_chief(shard_state, comm, logical);
  return logical;
}

void ShardPlan::gather_to_chief(const Tensor& shard_state, comm::Communicator& comm,
                                std::vector<float>& logical) const {
  require_world(*this, comm);
  const bool chief = comm.rank() == 0;
  if (!chief) logical.clear();
  if (!sharded_) {
    if (chief) copy_to_host(shard_state, logical);
    return;
  }
  if (chief) logical.resize(static_cast<size_t>(numel_));
  const std::vector<int64_t> offsets = bounds();
  std::vector<float> piece;
  for (int r = 0; r < replicas_; ++r) {
    if (r == comm.rank()) copy_to_host(shard_state, piece);
    else piece.resize(counts_[static_cast<size_t>(r)]);
    comm.broadcast(piece.data(), piece.size(), r);
    if (chief) std::copy(piece.begin(), piece.end(), logical.begin() + offsets[static_cast<size_t>(r)]);
  }
}

void ShardPlan::scatter_from_chief(const std::vector<float>& logical, Tensor& shard_state,
                                   comm::Communicator& comm) const {
  require_world(*this, comm);
  const bool chief = comm.rank() == 0;
  MIRRORED_CHECK(!chief || logical.size() == static_cast<size_t>(numel_), "state of ", logical.size(),
                 " elements for a plan of ", numel_);
  std::vector<float> values;
  if (!sharded_) {
    if (chief) values = logical;
    values.resize(static_cast<size_t>(numel_));
    comm.broadcast(values.data(), values.size(), 0);
    kernels::copy(Tensor::from(values, shard_state.shape()), shard_state);
    return;
  }
  const std::vector<int64_t> offsets = bounds();
  for (int r = 0; r < replicas_; ++r) {
    const size_t count = counts_[static_cast<size_t>(r)];
    if (chief) {
      const auto begin = logical.begin() + offsets[static_cast<size_t>(r)];
      values.assign(begin, begin + static_cast<std::ptrdiff_t>(count));
    } else {
      values.resize(count);
    }
    comm.broadcast(values.data(), values.size(), 0);
    if (r == comm.rank()) kernels::copy(Tensor::from(values, {static_cast<int64_t>(count)}), shard_state);
  }
}

}  // namespace mirrored::distribute
