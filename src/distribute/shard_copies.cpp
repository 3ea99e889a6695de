#include "mirrored/distribute/shard_copies.h"

#include <algorithm>

#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {

int ShardCopies::keeper_distance(const std::vector<std::string>& hosts) {
  const int world = static_cast<int>(hosts.size());
  for (int distance = 1; distance < world; ++distance) {
    bool elsewhere = true;
    for (int r = 0; r < world && elsewhere; ++r) elsewhere = hosts[static_cast<size_t>(r)] != hosts[static_cast<size_t>((r + distance) % world)];
    if (elsewhere) return distance;
  }
  return 1;  // one host (or no rotation reaches another host for every rank): the next rank
}

ShardCopies::ShardCopies(const ShardPlan& plan, comm::Communicator& comm, int distance, const Tensor& flat_params,
                         std::vector<const Tensor*> state, int64_t steps_done, int64_t optimizer_steps)
    : plan_(plan),
      comm_(comm),
      rank_(comm.rank()),
      distance_(distance),
      keeper_((comm.rank() + distance) % plan.replicas()),
      ward_((comm.rank() - distance % plan.replicas() + plan.replicas()) % plan.replicas()),
      flat_params_(flat_params),
      state_(std::move(state)),
      own_step_(steps_done),
      own_optimizer_steps_(optimizer_steps) {
  MIRRORED_CHECK(plan.sharded() && comm.size() == plan.replicas() && distance >= 1, "shard copies need a sharded plan",
                 " for the communicator's world (", plan.replicas(), " replicas, ", comm.size(), " ranks, distance ",
                 distance, ")");
  MIRRORED_CHECK(comm.capabilities().point_to_point, "shard copies need a communicator with point-to-point ",
                 "exchanges, not '", comm.backend(), "'");
  const int64_t own = plan.shard(rank_).numel();
  for (const Tensor* tensor : state_)
    MIRRORED_CHECK(tensor->device() == flat_params.device() && tensor->numel() == own, "an optimizer state tensor of ",
                   tensor->numel(), " values on ", tensor->device().str(), " for a shard of ", own, " on ",
                   flat_params.device().str());
  previous_.shard = rank_;
  ward_copy_.shard = ward_;
}

void ShardCopies::pack_own(std::vector<float>& out) const {
  const optim::ArenaRange range = plan_.shard(rank_);
  out.resize(floats_per_exchange());
  if (flat_params_.device().is_cpu()) {
    const float* params = flat_params_.data<float>();
    auto at = std::copy(params + range.begin, params + range.end, out.begin());
    for (const Tensor* tensor : state_) at = std::copy_n(tensor->data<float>(), tensor->numel(), at);
    return;
  }
  // On a GPU every piece goes through a host tensor: kernels::copy is ordered after the
  // compute stream's update and returns once the host side is ready. The exchange itself
  // is MPI's, on the host.
  const int64_t own = range.end - range.begin;
  ensure_shape(staging_, Shape{own}, DType::kF32, Device::cpu());
  auto at = out.begin();
  auto take = [&](const Tensor& slice) {
    kernels::copy(slice, staging_);
    at = std::copy_n(staging_.data<float>(), own, at);
  };
  take(flat_params_.view(range.begin, Shape{own}));
  for (const Tensor* tensor : state_) take(tensor->reshape(Shape{own}));
}

ShardCopies::~ShardCopies() {
  // MPI owns the buffers until the exchange completes; after a failure it does at once.
  try {
    settle_after_failure();
  } catch (const std::exception& e) {
    rank_warning(str_cat("shard copies: the last exchange: ", e.what()));
  }
}

void ShardCopies::keep_previous(int64_t steps_done, int64_t optimizer_steps) {
  const Stopwatch clock;
  complete_exchange();
  MIRRORED_CHECK(steps_done == own_step_, "keeping the shard of step ", steps_done, " while it holds step ", own_step_);
  // The last exchange packed the own shard as it still is: take that instead of a copy.
  if (outgoing_step_ == steps_done)
    previous_.values.swap(outgoing_);
  else
    pack_own(previous_.values);
  outgoing_step_ = -1;
  previous_.step = steps_done;
  previous_.optimizer_steps = optimizer_steps;
  seconds_in_step_ += clock.seconds();
}

void ShardCopies::updated(int64_t steps_done, int64_t optimizer_steps) {
  own_step_ = steps_done;
  own_optimizer_steps_ = optimizer_steps;
}

void ShardCopies::exchange(int64_t optimizer_steps) {
  const Stopwatch clock;
  complete_exchange();
  own_optimizer_steps_ = optimizer_steps;
  pack_own(outgoing_);
  outgoing_step_ = own_step_;
  incoming_.resize(shard_piece_floats(plan_, ward_, state_.size()));
  in_flight_step_ = own_step_;  // the ward is at the same step: every rank exchanges at its end
  in_flight_optimizer_steps_ = own_optimizer_steps_;
  in_flight_ = comm_.sendrecv_async(outgoing_.data(), outgoing_.size(), keeper_, incoming_.data(), incoming_.size(),
                                    ward_, comm::DataType::kF32);
  seconds_in_step_ += clock.seconds();
}

void ShardCopies::complete_exchange() {
  if (!in_flight_) return;
  in_flight_->wait();
  in_flight_.reset();
  // Only a completed exchange replaces the ward's copy: a failure leaves the older one whole.
  ward_copy_.values.swap(incoming_);
  ward_copy_.step = in_flight_step_;
  ward_copy_.optimizer_steps = in_flight_optimizer_steps_;
}

void ShardCopies::settle_after_failure() {
  if (!in_flight_) return;
  try {
    complete_exchange();
  } catch (const comm::PeerFailure&) {
    in_flight_.reset();  // its requests completed in error: the buffers are free again
  }
}

std::vector<ShardPiece> ShardCopies::pieces() const {
  std::vector<ShardPiece> pieces;
  ShardPiece own{rank_, own_step_, own_optimizer_steps_, {}};
  pack_own(own.values);
  pieces.push_back(std::move(own));
  if (previous_.step >= 0 && previous_.step != own_step_) pieces.push_back(previous_);
  if (ward_copy_.step >= 0) pieces.push_back(ward_copy_);
  return pieces;
}

}  // namespace mirrored::distribute
