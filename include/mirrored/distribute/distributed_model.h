#pragma once
// A model replica whose gradients are averaged across replicas, like PyTorch's DDP module:
// backward() feeds the gradient reducer as layers finish; synchronize_gradients() waits
// until every gradient holds its mean over replicas. Created by MirroredStrategy::scope.
//
// Gradient accumulation (DDP's no_sync, Horovod's backward_passes_per_step): with
// accumulate_steps = K, the first K-1 backward passes after zero_grad() only sum
// gradients locally; the K-th also all-reduces, and the result is the mean over all K
// micro-batches and all replicas.
#include <memory>

#include "mirrored/distribute/gradient_clipper.h"
#include "mirrored/distribute/gradient_reducer.h"
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
  DistributedModel(std::unique_ptr<nn::Model> model, comm::Communicator& gradients, comm::Communicator& replicas,
                   ReducerOptions options, int accumulate_steps = 1);
  ~DistributedModel();
  DistributedModel(DistributedModel&&) noexcept;
  DistributedModel& operator=(DistributedModel&&) = delete;

  const Tensor& forward(const Tensor& x, nn::Mode mode) { return model_->forward(x, mode); }
  void zero_grad();
  void backward(const Tensor& dloss_dout);
  void synchronize_gradients();
  // After synchronize_gradients: scales the averaged gradient to a global L2 norm of at
  // most `max_norm` (GradientClipper), on the device, the same on every replica.
  void clip_gradient_norm(float max_norm) { clipper_.clip(model_->parameters().flat_grads(), max_norm); }
  // The norm before the last clip (f32 [1] on the model's device; undefined before one).
  const Tensor& gradient_norm() const { return clipper_.norm(); }

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
  comm::Communicator* comm_;
  std::unique_ptr<CommunicatorReducer> cross_replica_;  // the model's layers point at it
  GradientClipper clipper_;
};

}  // namespace mirrored::distribute
