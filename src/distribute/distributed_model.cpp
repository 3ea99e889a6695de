#include "mirrored/distribute/distributed_model.h"

#include <limits>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {

namespace {
// Host buffers go over any communicator; device buffers need NCCL's, which a model on a
// GPU is given (MirroredStrategy::mirror) and which orders itself after the compute stream.
void require_reachable(const Tensor& values, const comm::Communicator& comm, const char* what) {
  MIRRORED_CHECK(values.device().is_cpu() || comm.backend() == "nccl", what, " of tensors on ", values.device().str(),
                 " needs the device communicator, not '", comm.backend(), "'");
}
}  // namespace

void CommunicatorReducer::sum(Tensor& values) {
  require_reachable(values, comm_, "cross-replica sum");
  comm_.allreduce(values.data<float>(), static_cast<size_t>(values.numel()), comm::ReduceOp::kSum);
}

DistributedModel::DistributedModel(std::unique_ptr<nn::Model> model, comm::Communicator& gradients,
                                   comm::Communicator& replicas, ReducerOptions options, int accumulate_steps)
    : model_(std::move(model)),
      reducer_(std::make_unique<GradientReducer>(model_->parameters(), gradients, options)),
      accumulate_steps_(accumulate_steps),
      comm_(&replicas),
      gradients_comm_(&gradients),
      cross_replica_(std::make_unique<CommunicatorReducer>(replicas)) {
  MIRRORED_CHECK(accumulate_steps_ >= 1, "accumulate_steps = ", accumulate_steps_);
  // A world of one has nothing to reduce: layers then skip the call altogether.
  model_->set_replica(replicas.rank(), replicas.size() > 1 ? cross_replica_.get() : nullptr);
}

DistributedModel::~DistributedModel() = default;
DistributedModel::DistributedModel(DistributedModel&&) noexcept = default;

void DistributedModel::zero_grad() {
  model_->parameters().zero_grads();
  backward_passes_ = 0;
}

void DistributedModel::backward(const Tensor& dloss_dout) {
  MIRRORED_CHECK(backward_passes_ < accumulate_steps_, "more than accumulate_steps = ", accumulate_steps_,
                 " backward passes between zero_grad() calls");
  if (++backward_passes_ < accumulate_steps_) {
    model_->backward(dloss_dout);  // accumulate locally, no communication
    return;
  }
  reducer_->begin_step(accumulate_steps_);
  model_->backward(dloss_dout, [this](size_t layer) { reducer_->on_layer_ready(layer); });
}

void DistributedModel::synchronize_gradients() {
  MIRRORED_CHECK(backward_passes_ == accumulate_steps_, "synchronize_gradients() after ", backward_passes_,
                 " of ", accumulate_steps_, " backward passes");
  reducer_->finish();
  if (reducer_->sharded()) agree_on_non_finite();
}

void DistributedModel::agree_on_non_finite() {
  Tensor& grads = model_->parameters().flat_grads();
  const optim::ArenaRange owned = reducer_->owned_range();
  Tensor mine = grads.view(owned.begin, {owned.numel()});
  const int32_t local = owned.numel() > 0 && !kernels::all_finite(mine) ? 1 : 0;
  int32_t any = local;
  gradients_comm_->allreduce_async(&any, 1, comm::DataType::kI32, comm::ReduceOp::kMax)
      ->wait(comm::Work::Clock::time_point::max());
  if (any == 0 || local != 0 || owned.numel() == 0) return;
  // A NaN in the first owned element: the update is refused here as where it arose.
  Tensor first = mine.view(0, {1});
  kernels::copy(Tensor::from(std::vector<float>{std::numeric_limits<float>::quiet_NaN()}, {1}), first);
}

void DistributedModel::gather_parameters() {
  if (!reducer_->sharded()) return;
  Tensor& params = model_->parameters().flat_params();
  require_reachable(params, *gradients_comm_, "parameter all-gather");
  // The polling wait, as the reducer's: a rank spinning in MPI_Wait for a slower peer takes
  // the core that peer needs where ranks share cores.
  gradients_comm_->allgather_inplace_async(params.data<float>(), reducer_->shard_counts(), comm::DataType::kF32)
      ->wait(comm::Work::Clock::time_point::max());
}

void DistributedModel::clip_gradient_norm(float max_norm) {
  const optim::ArenaRange owned = reducer_->owned_range();
  Tensor mine = model_->parameters().flat_grads().view(owned.begin, {owned.numel()});
  clipper_.clip(mine, max_norm, reducer_->sharded() ? gradients_comm_ : nullptr);
}

void DistributedModel::sum_over_shards(Tensor& values) {
  if (!reducer_->sharded()) return;
  require_reachable(values, *gradients_comm_, "sum over shards");
  gradients_comm_->allreduce(values.data<float>(), static_cast<size_t>(values.numel()), comm::ReduceOp::kSum);
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
