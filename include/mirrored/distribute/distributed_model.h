#pragma once
// A model replica whose gradients are averaged across replicas, like PyTorch's DDP module:
// backward() feeds the gradient reducer as layers finish; synchronize_gradients() waits
// until every gradient holds its mean over replicas. Created by MirroredStrategy::scope.
//
// Gradient accumulation (DDP's no_sync, Horovod's backward_passes_per_step): with
// accumulate_steps = K, the first K-1 backward passes after zero_grad() only sum
// gradients locally; the K-th also all-reduces, and the result is the mean over all K
// micro-batches and all replicas.
//
// Sharded optimizer state (ZeRO stage 1, ReducerOptions::shard): the flat arena is cut into
// one contiguous shard per replica (shard_plan.h). synchronize_gradients() then leaves the
// mean gradient of this replica's shard() only; the optimizer updates that shard;
// gather_parameters() all-gathers the updated shards so every replica holds the whole model
// again. Unsharded, shard() is the whole arena and gather_parameters() does nothing, so a
// training step written for the sharded case is right for both:
//
//   model.synchronize_gradients();   // reduce-scatter (sharded) or all-reduce
//   model.flag_non_finite(flag);     // agreed over shards
//   model.clip_gradient_norm(c);     // the norm summed over shards
//   optimizer.step();                // over shard()
//   (or optimizer.scale_gradients_by(&model.gradient_clip_factor(c)) before the step: the
//   same update, with the clip applied inside it)
//   model.gather_parameters();       // all-gather (sharded) or nothing
//
// Whatever else inspects the averaged gradients must look at shard() only and combine the
// per-replica results with the shard plan's collectives.
//
// World-size-invariant reduction (reduction = invariant, batch_plan.h): the replica's batch
// is computed as virtual_replicas() groups of virtual_replica_size() samples, one forward
// and backward each, begin_virtual_replica(g) before each; synchronize_gradients() sums
// every group's gradient on every rank exactly (VirtualReplicaGradients) instead of the
// bucketed all-reduce, so every replica then holds the whole averaged gradient, the same
// bits at any world size. Sharded, the optimizer still updates shard() only, and clipping
// takes the norm of the whole gradient that every replica holds.
#include <memory>

#include "mirrored/distribute/batch_plan.h"
#include "mirrored/distribute/gradient_clipper.h"
#include "mirrored/distribute/gradient_reducer.h"
#include "mirrored/distribute/virtual_replica_gradients.h"
#include "mirrored/nn/model.h"

namespace mirrored::distribute {

// nn::CrossReplicaReducer over a communicator: sync batch norm's statistics. Called from
// the thread that runs the step, in layer order, on the replicas' communicator (the
// world on CPUs, whose traffic never meets a communication thread's on the gradient
// communicator; on GPUs the one NCCL communicator, which the gradient buckets share from
// the same thread, so every rank issues its NCCL calls in the same order).
class CommunicatorReducer final : public nn::CrossReplicaReducer {
 public:
  explicit CommunicatorReducer(comm::Communicator& comm) : comm_(comm) {}
  void sum(Tensor& values) override;

 private:
  comm::Communicator& comm_;
};

class DistributedModel {
 public:
  // `gradients`: the gradient reducer's communicator; `replicas`: sync batch norm and
  // synchronize_buffers() (buffers on the model's device). Both outlive the model.
  // `plan`: the batch plan (null: fast with even shares). Invariant: this replica computes
  // its groups, whose gradients are then summed exactly over `gradients`. Fast: this
  // replica's gradients and loss are weighted by its share (BatchPlan::share_weight).
  DistributedModel(std::unique_ptr<nn::Model> model, comm::Communicator& gradients, comm::Communicator& replicas,
                   ReducerOptions options, int accumulate_steps = 1, const BatchPlan* plan = nullptr);
  ~DistributedModel();
  DistributedModel(DistributedModel&&) noexcept;
  DistributedModel& operator=(DistributedModel&&) = delete;

  const Tensor& forward(const Tensor& x, nn::Mode mode) { return model_->forward(x, mode); }
  // Groups this replica computes one pass each: 1 (its whole batch) unless invariant.
  int virtual_replicas() const { return virtual_ ? virtual_->local() : 1; }
  int64_t virtual_replica_size() const { return virtual_size_; }  // samples; 0: the whole batch
  // What this replica's loss gradient (and its loss, for the records) is multiplied by:
  // 1 unless fast mode spreads the batch unevenly (a shrunk world).
  float share_weight() const { return share_weight_; }
  // Before the forward pass of group `index` of this replica's batch, whose row 0 is
  // `first_sample` of the global batch (dropout masks are keyed by global sample).
  void begin_virtual_replica(int index, int64_t first_sample);
  void zero_grad();
  void backward(const Tensor& dloss_dout);
  void synchronize_gradients();
  // After synchronize_gradients: int32 [1] `flag` on the model's device = 1 when any
  // replica's averaged gradients (its shard()) hold NaN/Inf, else 0; every replica gets the
  // same value without the host waiting for it (NonFiniteGuard).
  void flag_non_finite(Tensor& flag);
  // After synchronize_gradients: scales the averaged gradient this replica holds to a
  // global L2 norm of at most `max_norm` (GradientClipper), on the device, the same on
  // every replica; sharded, the partial sums of squares are summed over shards first.
  void clip_gradient_norm(float max_norm);
  // The same clip's factor without scaling (f32 [1] on the model's device), for the
  // optimizer to apply as it reads each gradient (Optimizer::scale_gradients_by): the
  // clipped update's bits without a pass of its own over the arena.
  const Tensor& gradient_clip_factor(float max_norm);
  // The norm before the last clip (f32 [1] on the model's device; undefined before one).
  const Tensor& gradient_norm() const { return clipper_.norm(); }

  // All-gathers the shards of the parameters after the optimizer updated this replica's
  // (collective); nothing when unsharded.
  void gather_parameters();

  const ShardPlan& shard_plan() const { return reducer_->shard_plan(); }
  // [begin, end) of the flat arena whose averaged gradient this replica holds after
  // synchronize_gradients() and whose parameters its optimizer updates: its shard, or the
  // whole arena.
  optim::ArenaRange shard() const { return reducer_->owned_range(); }
  // The communicator the shard plan's collectives run over (the reducer's).
  comm::Communicator& shard_communicator() { return *gradients_comm_; }

  int accumulate_steps() const { return accumulate_steps_; }
  const CommStats& comm_stats() const { return reducer_->last_step_stats(); }
  const GradientReducer& reducer() const { return *reducer_; }
  void set_timeline(Timeline* timeline);
  // The step about to run (dropout masks are keyed by it).
  void set_step(int64_t step) { model_->set_step(step); }
  // Averages the model's buffers (batch norm running statistics) over replicas: without
  // sync batch norm each replica tracks its own; call before evaluating or saving.
  void synchronize_buffers();

  nn::Model& module() { return *model_; }
  nn::ParameterArena& parameters() { return model_->parameters(); }
  const nn::ParameterArena& parameters() const { return model_->parameters(); }

 private:
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<GradientReducer> reducer_;
  int accumulate_steps_;
  int backward_passes_ = 0;  // since zero_grad()
  std::unique_ptr<VirtualReplicaGradients> virtual_;  // reduction = invariant only
  int64_t virtual_size_ = 0;
  float share_weight_ = 1.0f;
  float virtual_scale_ = 1.0f;  // 1 / (virtual replicas x accumulate_steps): the mean
  comm::Communicator* comm_;
  comm::Communicator* gradients_comm_;
  std::unique_ptr<CommunicatorReducer> cross_replica_;  // the model's layers point at it
  GradientClipper clipper_;
};

}  // namespace mirrored::distribute
