#pragma once
// MirroredStrategy: TensorFlow's synchronous data-parallel contract, one replica per rank.
//  - the global batch is split by a batch plan (batch_plan.h): evenly, per-replica batch =
//    global batch / replicas, or, with reduction = invariant, in virtual replicas;
//  - variables are created by the chief and broadcast, so every replica starts identical;
//  - run() executes a step on this replica; gradients are averaged over replicas;
//  - reduce() combines a per-replica value (loss, counts) across replicas.
// MultiWorkerMirroredStrategy is the same contract across nodes.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "mirrored/comm/communicator.h"
#include "mirrored/distribute/batch_plan.h"
#include "mirrored/distribute/distributed_dataset.h"
#include "mirrored/distribute/distributed_model.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::distribute {

using comm::ReduceOp;

struct ModelOptions {
  Shape input_shape;   // one sample, e.g. {1, 28, 28}
  uint64_t seed = 0;   // the chief initialises from it; the others receive a broadcast
  ReducerOptions reducer = {};
  int accumulate_steps = 1;
  // The global batch the model trains on: the batch plan decides which groups of it this
  // replica computes (reduction = invariant, where it is needed) or how much its share
  // weighs (fast mode with uneven shares; 0 assumes even ones).
  int64_t global_batch = 0;
};

// Allreduce (how gradients are all-reduced) is declared in runtime/runtime.h, which owns the
// communicators it selects.
// kAuto resolved for a job of `world_size` ranks on `num_nodes` nodes.
runtime::Allreduce resolve_allreduce(runtime::Allreduce requested, int num_nodes, int world_size);

struct StrategyOptions {
  runtime::Allreduce allreduce = runtime::Allreduce::kAuto;
  ReductionOptions reduction = {};
};

class MirroredStrategy {
 public:
  explicit MirroredStrategy(runtime::Runtime& runtime, StrategyOptions options = {});

  int num_replicas_in_sync() const { return comm_.size(); }
  int replica_id() const { return comm_.rank(); }
  bool is_chief() const { return replica_id() == 0; }
  Device device() const { return runtime_.device(); }
  runtime::Runtime& runtime() { return runtime_; }
  // Host values (loss sums, counts, checksums): the MPI world.
  comm::Communicator& communicator() { return comm_; }
  // Parameters and gradients on device(): NCCL on GPUs, the world on CPUs.
  comm::Communicator& device_communicator() { return device_comm_; }
  // The all-reduce the gradient reducers use (flat or hierarchical, resolved).
  runtime::Allreduce allreduce() const { return allreduce_; }
  // The communicator gradient buckets travel on (the Runtime's, for allreduce()).
  comm::Communicator& gradient_communicator() { return gradients_; }

  // How every global batch is split over the replicas (the reduction mode's plan); an
  // InputError on every rank when the batch does not fit the mode and world.
  BatchPlan batch_plan(int64_t global_batch) const;
  Reduction reduction() const { return reduction_.mode; }
  // This replica's samples of each global batch (batch_plan's errors).
  int64_t per_replica_batch(int64_t global_batch) const;
  data::IndexRange batch_share(int64_t global_batch) const {
    return batch_plan(global_batch).samples_of(replica_id());
  }

  // Builds the model returned by `make_model` on this replica's device, initialises it on
  // the chief and broadcasts the parameters to every replica. The model's gradients are
  // reduced over gradient_communicator(); options.reducer.ranks_on_host is filled in from
  // the cluster table.
  template <typename MakeModel>
  DistributedModel scope(MakeModel&& make_model, const ModelOptions& options) {
    return mirror(std::make_unique<nn::Model>(make_model()), options);
  }
  DistributedModel mirror(std::unique_ptr<nn::Model> model, const ModelOptions& options);

  DistributedDataset distribute_dataset(std::shared_ptr<const data::Dataset> dataset,
                                        const DatasetOptions& options);
  EvalDataset distribute_eval_dataset(std::shared_ptr<const data::Dataset> dataset, int64_t batch);

  // Runs one step on this replica (one replica per process).
  template <typename StepFn, typename... Args>
  decltype(auto) run(StepFn&& step_fn, Args&&... args) {
    return std::invoke(std::forward<StepFn>(step_fn), std::forward<Args>(args)...);
  }

  template <typename T>
  T reduce(ReduceOp op, T value) {
    return comm_.allreduce_value(value, op);
  }
  // The sum of every replica's `values` whose bits do not depend on how the terms are
  // spread over replicas (comm/exact_sum.h); `total_terms` (the same on every replica, the
  // same at any world size) bounds their count over all replicas.
  double reduce_exact(const std::vector<double>& values, int64_t total_terms);

  // Cross-replica check that every replica holds the same parameters (a checksum of the
  // bytes). Throws, naming the replicas that drifted from the chief.
  void check_replicas_in_sync(const DistributedModel& model);

 private:
  runtime::Runtime& runtime_;
  comm::Communicator& comm_;
  comm::Communicator& device_comm_;
  runtime::Allreduce allreduce_ = runtime::Allreduce::kFlat;
  comm::Communicator& gradients_;
  ReductionOptions reduction_;
};

using MultiWorkerMirroredStrategy = MirroredStrategy;

}  // namespace mirrored::distribute
