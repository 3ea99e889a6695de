#include "mirrored/distribute/distributed_model.h"

#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {

namespace {
void require_reachable(const Tensor& values, const comm::Communicator& comm, const char* what) {
  MIRRORED_CHECK(values.device().is_cpu() || comm.capabilities().device_buffers, what, " of tensors on ",
                 values.device().str(), " needs a communicator that takes device buffers, not '", comm.backend(), "'");
}
}  // namespace

void CommunicatorReducer::sum(Tensor& values) {
  require_reachable(values, comm_, "cross-replica sum");
  comm_.allreduce(values.data<float>(), static_cast<size_t>(values.numel()), comm::ReduceOp::kSum);
}

DistributedModel::DistributedModel(std::unique_ptr<nn::Model> model, comm::Communicator& gradients,
                                   comm::Communicator& replicas, ReducerOptions options, int accumulate_steps,
                                   const BatchPlan* plan)
    : model_(std::move(model)),
      reducer_(std::make_unique<GradientReducer>(model_->parameters(), gradients, options)),
      accumulate_steps_(accumulate_steps),
      comm_(&replicas),
      gradients_comm_(&gradients),
      cross_replica_(std::make_unique<CommunicatorReducer>(replicas)) {
  MIRRORED_CHECK(accumulate_steps_ >= 1, "accumulate_steps = ", accumulate_steps_);
  // A world of one has nothing to reduce: layers then skip the call altogether.
  model_->set_cross_replica_reducer(replicas.size() > 1 ? cross_replica_.get() : nullptr);
  if (plan == nullptr) return;  // fast, even shares
  MIRRORED_CHECK(plan->world() == gradients.size(), "a batch plan for ", gradients.size(), " replicas");
  share_weight_ = plan->share_weight(gradients.rank());  // 1 unless fast with uneven shares
  if (plan->mode() != Reduction::kInvariant) return;
  const int local = static_cast<int>(plan->groups_of(gradients.rank()).size());
  virtual_ = std::make_unique<VirtualReplicaGradients>(model_->parameters(), local, plan->groups());
  virtual_size_ = plan->group_size();
  virtual_scale_ = 1.0f / static_cast<float>(plan->groups() * accumulate_steps_);
}

void DistributedModel::begin_virtual_replica(int index, int64_t first_sample) {
  model_->set_first_sample(first_sample);
  if (virtual_) virtual_->begin(index);
}

DistributedModel::~DistributedModel() = default;
DistributedModel::DistributedModel(DistributedModel&&) noexcept = default;

void DistributedModel::zero_grad() {
  model_->parameters().zero_grads();
  backward_passes_ = 0;
  if (virtual_) virtual_->restart();
}

void DistributedModel::backward(const Tensor& dloss_dout) {
  const int passes = accumulate_steps_ * virtual_replicas();
  MIRRORED_CHECK(backward_passes_ < passes, "more than accumulate_steps = ", accumulate_steps_, " x ",
                 virtual_replicas(), " virtual replica(s) backward passes between zero_grad() calls");
  // Invariant: every pass only accumulates; synchronize_gradients() sums them all at once.
  if (++backward_passes_ < passes || virtual_) {
    model_->backward(dloss_dout);  // accumulate locally, no communication
    return;
  }
  reducer_->begin_step(accumulate_steps_);
  model_->backward(dloss_dout, [this](size_t layer) { reducer_->on_layer_ready(layer); });
}

void DistributedModel::synchronize_gradients() {
  MIRRORED_CHECK(backward_passes_ == accumulate_steps_ * virtual_replicas(), "synchronize_gradients() after ",
                 backward_passes_, " of ", accumulate_steps_ * virtual_replicas(), " backward passes");
  if (virtual_) {
    virtual_->sum(*gradients_comm_, virtual_scale_);
    return;
  }
  reducer_->finish();
}

void DistributedModel::flag_non_finite(Tensor& flag) {
  const optim::ArenaRange owned = shard();
  kernels::flag_non_finite(model_->parameters().flat_grads().view(owned.begin, {owned.numel()}), flag);
  shard_plan().any_over_shards(flag, *gradients_comm_);
}

void DistributedModel::gather_parameters() { shard_plan().all_gather(model_->parameters().flat_params(), *gradients_comm_); }

void DistributedModel::clip_gradient_norm(float max_norm) {
  if (virtual_) {
    // Every replica holds the whole summed gradient: the norm over all of it, locally, is
    // the same bits everywhere (a sum over shards would depend on the world size).
    clipper_.clip(model_->parameters().flat_grads(), max_norm);
    return;
  }
  const optim::ArenaRange owned = shard();
  Tensor mine = model_->parameters().flat_grads().view(owned.begin, {owned.numel()});
  clipper_.clip(mine, max_norm, shard_plan(), *gradients_comm_);
}

const Tensor& DistributedModel::gradient_clip_factor(float max_norm) {
  // The norm over the same gradient as clip_gradient_norm's, for the same reasons.
  if (virtual_) return clipper_.factor(model_->parameters().flat_grads(), max_norm);
  const optim::ArenaRange owned = shard();
  const Tensor mine = model_->parameters().flat_grads().view(owned.begin, {owned.numel()});
  return clipper_.factor(mine, max_norm, shard_plan(), *gradients_comm_);
}

void DistributedModel::set_timeline(Timeline* timeline) {
  model_->set_timeline(timeline);
  reducer_->set_timeline(timeline);
}

void DistributedModel::synchronize_buffers() {
  Tensor& buffers = model_->parameters().flat_buffers();
  if (comm_->size() == 1 || buffers.numel() == 0) return;
  require_reachable(buffers, *comm_, "buffer all-reduce");
  comm_->allreduce(buffers.data<float>(), static_cast<size_t>(buffers.numel()), comm::ReduceOp::kMean);
}

}  // namespace mirrored::distribute
