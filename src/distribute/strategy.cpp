#include "mirrored/distribute/strategy.h"

#include <cstring>
#include <optional>

#include "mirrored/comm/exact_sum.h"
#include "mirrored/core/fingerprint.h"
#include "mirrored/core/log.h"
#include "mirrored/distribute/replica_agreement.h"

namespace mirrored::distribute {
namespace {
// The parameter bytes' fingerprint, compared exactly across replicas.
uint64_t fingerprint(const Tensor& t) {
  const auto values = t.to_vector();
  return fingerprint_bytes(values.data(), values.size() * sizeof(float));
}
}  // namespace

runtime::Allreduce resolve_allreduce(runtime::Allreduce requested, int num_nodes, int world_size) {
  if (requested != runtime::Allreduce::kAuto) return requested;
  // Two levels pay off only when a node holds several ranks whose traffic the leader can
  // combine, and there is a network between nodes to spare.
  return num_nodes > 1 && world_size > num_nodes ? runtime::Allreduce::kHierarchical : runtime::Allreduce::kFlat;
}

namespace {
runtime::Allreduce resolve_for(runtime::Runtime& runtime, runtime::Allreduce requested) {
  const runtime::Cluster& cluster = runtime.cluster();
  return resolve_allreduce(requested, cluster.num_nodes(), cluster.world_size());
}
}  // namespace

MirroredStrategy::MirroredStrategy(runtime::Runtime& runtime, StrategyOptions options)
    : runtime_(runtime),
      comm_(runtime.world()),
      device_comm_(runtime.device_communicator()),
      allreduce_(resolve_for(runtime, options.allreduce)),
      gradients_(runtime.gradient_communicator(allreduce_)),
      reduction_(options.reduction) {
  const runtime::Cluster& cluster = runtime.cluster();
  if (device().is_cuda()) {
    // One NCCL communicator carries everything on the device; NCCL picks its own algorithm.
    if (cluster.world_size() > 1)
      chief_info(str_cat("gradient all-reduce: NCCL (", cluster.world_size(), " ranks on ", cluster.num_nodes(),
                         " node(s))"));
  } else if (allreduce_ == runtime::Allreduce::kHierarchical && runtime.uses_mpi()) {
    const int nodes = runtime.hierarchical_nodes();
    // MPI groups ranks by shared memory, the table by host name (or Slurm's node ids);
    // they differ when, say, containers on one machine have their own host names.
    if (nodes != cluster.num_nodes() && is_chief())
      rank_warning(str_cat("allreduce = hierarchical: MPI finds ", nodes, " shared-memory node(s), the cluster table ",
                           cluster.num_nodes(), " host(s); reducing over MPI's nodes"));
    chief_info(str_cat("gradient all-reduce: hierarchical (", nodes, " node leader(s), ", cluster.world_size(),
                       " ranks)"));
  } else if (cluster.world_size() > 1) {
    chief_info(str_cat("gradient all-reduce: flat (", cluster.world_size(), " ranks on ", cluster.num_nodes(),
                       " node(s)", runtime.uses_mpi() ? ", Open MPI nonblocking algorithm " : "",
                       runtime.nonblocking_allreduce_algorithm(), ")"));
  }
}

BatchPlan MirroredStrategy::batch_plan(int64_t global_batch) const {
  return BatchPlan::make(global_batch, num_replicas_in_sync(), reduction_);
}

int64_t MirroredStrategy::per_replica_batch(int64_t global_batch) const { return batch_share(global_batch).size(); }

namespace {
// What reduction = invariant cannot do yet, refused on every rank before any collective.
void require_invariant_support(const nn::Model& model, const ReducerOptions& reducer) {
  const char* why = nullptr;
  if (model.parameters().num_buffers() > 0)
    why = "cannot train models with batch normalisation: their running statistics and sync_batchnorm's "
          "batch statistics depend on how the batch is spread over replicas; use reduction = fast";
  else if (reducer.compression != GradCompression::kNone)
    why = "sums float32 gradients exactly; grad_compression must be none";
  if (why != nullptr)
    throw InputError(str_cat("reduction = invariant ", why), ExitCode::kUsage);
}
}  // namespace

DistributedModel MirroredStrategy::mirror(std::unique_ptr<nn::Model> model, const ModelOptions& options) {
  model->build(options.input_shape, device());
  // Before the first collective that depends on the model's size: ranks started with
  // different models or settings stop here, named, instead of hanging in the broadcast.
  require_same_replicas(
      describe_replica(model->parameters(), options.reducer, options.accumulate_steps, model->context().precision),
      comm_);
  if (is_chief()) model->initialize(options.seed);
  model->set_random_seed(options.seed);  // dropout masks, on every replica
  Tensor& params = model->parameters().flat_params();
  MIRRORED_CHECK(params.device().is_cpu() || device_comm_.capabilities().device_buffers, "parameters on ",
                 params.device().str(), " but the device communicator ('", device_comm_.backend(),
                 "') takes host buffers only");
  device_comm_.broadcast(params.data<float>(), static_cast<size_t>(params.numel()), 0);
  ReducerOptions reducer = options.reducer;
  // Sharded on several nodes (allreduce = auto chose the hierarchical communicator): its
  // reduce-scatter and all-gather are the flat ones, which already move one piece per rank.
  MIRRORED_CHECK(!reducer.shard || gradients_.capabilities().sharded_collectives, "optimizer.shard = true: the '",
                 gradients_.backend(), "' communicator has no reduce-scatter");
  reducer.ranks_on_host = runtime_.cluster().local_size();
  if (reduction_.mode == Reduction::kFast) {
    // The plan weighs uneven shares (a shrunk world); without a global batch they are even.
    const std::optional<BatchPlan> plan =
        options.global_batch > 0 ? std::optional<BatchPlan>(batch_plan(options.global_batch)) : std::nullopt;
    return DistributedModel(std::move(model), gradients_, device_comm_, reducer, options.accumulate_steps,
                            plan ? &*plan : nullptr);
  }
  require_invariant_support(*model, reducer);
  MIRRORED_CHECK(options.global_batch > 0, "reduction = invariant needs ModelOptions::global_batch");
  const BatchPlan plan = batch_plan(options.global_batch);
  chief_info(str_cat("reduction = invariant: ", plan.describe(), "; the same bits at any world size from 1 to ",
                     plan.groups()));
  return DistributedModel(std::move(model), gradients_, device_comm_, reducer, options.accumulate_steps, &plan);
}

DistributedDataset MirroredStrategy::distribute_dataset(std::shared_ptr<const data::Dataset> dataset,
                                                        const DatasetOptions& options) {
  return DistributedDataset(std::move(dataset), options, batch_share(options.global_batch), device());
}

EvalDataset MirroredStrategy::distribute_eval_dataset(std::shared_ptr<const data::Dataset> dataset, int64_t batch) {
  return EvalDataset(std::move(dataset), batch, replica_id(), num_replicas_in_sync(), device());
}

double MirroredStrategy::reduce_exact(const std::vector<double>& values, int64_t total_terms) {
  return comm::exact_sum(values, total_terms, comm_);
}

void MirroredStrategy::check_replicas_in_sync(const DistributedModel& model) {
  if (num_replicas_in_sync() == 1) return;  // nothing to compare, and no host copy of the parameters
  const uint64_t mine = fingerprint(model.parameters().flat_params());
  const auto all = comm_.allgather_value<int64_t>(static_cast<int64_t>(mine));
  std::vector<int> drifted;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) drifted.push_back(static_cast<int>(r));
  if (!drifted.empty())
    throw Error(ExitCode::kFailure,
                str_cat("replicas out of sync: the parameters of rank(s) ", join(drifted, ", "),
                        " differ from the chief's"),
                /*uniform=*/true);
}

}  // namespace mirrored::distribute
