#pragma once
// A model: a sequence of layers over one parameter arena.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mirrored/core/timeline.h"
#include "mirrored/nn/layer.h"
#include "mirrored/nn/part_timer.h"

namespace mirrored::nn {

class Model {
 public:
  Model() = default;
  Model(Model&&) = default;
  Model& operator=(Model&&) = default;

  void add(std::unique_ptr<Layer> layer);
  // Declares every parameter for per-sample `input_shape`, lets layers take over the work
  // of the ones after them where they can (Layer::fuse_following), allocates the arena on
  // `device` and binds the layers. Call once, after the last add().
  void build(const Shape& input_shape, Device device = Device::cpu());
  // Before build(): false runs every layer apart (the fused kernels' tests compare the two).
  void set_layer_fusion(bool on);
  void initialize(uint64_t seed);  // deterministic from the seed

  // Run context the layers see (see RunContext): the seed of dropout masks, where the
  // batch sits in the global batch, the cross-replica reducer (sync batch norm), the
  // current step.
  void set_random_seed(uint64_t seed) { context_->seed = seed; }
  void set_first_sample(int64_t first_sample);
  void set_cross_replica_reducer(CrossReplicaReducer* reducer) { context_->reducer = reducer; }
  void set_step(int64_t step) { context_->step = step; }
  // The arithmetic of every matrix product and convolution in the model (core/precision.h);
  // parameters, gradients and every other op stay float32 either way.
  void set_precision(Precision precision) { context_->precision = precision; }
  const RunContext& context() const { return *context_; }

  const Tensor& forward(const Tensor& x, Mode mode);
  // Called after each layer's backward, in reverse layer order, with that layer's index:
  // its gradients are final for this step (the hook the gradient reducer listens on).
  using GradReadyHook = std::function<void(size_t layer_index)>;
  void backward(const Tensor& dloss_dout, const GradReadyHook& on_grads_ready = {});

  ParameterArena& parameters() { return arena_; }
  const ParameterArena& parameters() const { return arena_; }
  size_t num_layers() const { return layers_.size(); }
  Layer& layer(size_t index) { return *layers_.at(index); }
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return output_shape_; }
  Device device() const { return device_; }
  std::string summary() const;  // one line per layer: index, kind, output shape, #params
  // Records forward and per-layer backward spans while the timeline is recording.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // Times every layer's forward and backward (nullptr: off; `mirrored bench layers`).
  void set_layer_timer(LayerTimer* timer) { layer_timer_ = timer; }
  // The layer whose forward and backward compute layer `index`: `index` itself, or an
  // earlier one that took its work over (build()).
  size_t computed_by(size_t index) const { return computed_by_.at(index); }
  // Layer `index`'s output for one sample, as build() found it.
  const Shape& layer_output_shape(size_t index) const { return layer_output_shapes_.at(index); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> layer_output_shapes_;
  ParameterArena arena_;
  Shape input_shape_;
  Shape output_shape_;
  Device device_;
  bool built_ = false;
  bool fuse_layers_ = true;
  std::vector<size_t> computed_by_;  // see computed_by()
  Timeline* timeline_ = nullptr;
  LayerTimer* layer_timer_ = nullptr;
  std::vector<std::string> backward_span_names_;  // "backward 3.linear", built once
  // On the heap so that the layers' pointers to it survive moving the Model.
  std::unique_ptr<RunContext> context_ = std::make_unique<RunContext>();
  void fuse(Device device);
};

}  // namespace mirrored::nn
