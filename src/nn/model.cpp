#include "mirrored/nn/model.h"

#include <chrono>
#include <sstream>

#include "mirrored/kernels/kernels.h"

namespace mirrored::nn {
namespace {

// Reports one layer's forward or backward to the model's LayerTimer, when one is set.
class LayerClock {
 public:
  LayerClock(LayerTimer* timer, size_t layer, bool backward) : timer_(timer), layer_(layer), backward_(backward) {
    if (timer_) {
      timer_->begin(layer_, backward_);
      start_ = timer_->now();
    }
  }
  ~LayerClock() {
    if (timer_) timer_->end(layer_, backward_, timer_->now() - start_);
  }
  LayerClock(const LayerClock&) = delete;
  LayerClock& operator=(const LayerClock&) = delete;

 private:
  LayerTimer* timer_;
  size_t layer_;
  bool backward_;
  double start_ = 0.0;
};

}  // namespace

void Model::add(std::unique_ptr<Layer> layer) {
  MIRRORED_CHECK(!built_, "add() after build()");
  MIRRORED_CHECK(layer != nullptr, "add() of a null layer");
  layers_.push_back(std::move(layer));
}

void Model::build(const Shape& input_shape, Device device) {
  MIRRORED_CHECK(!built_, "model built twice");
  MIRRORED_CHECK(!layers_.empty(), "model has no layers");
  input_shape_ = input_shape;
  device_ = device;
  Shape shape = input_shape;
  for (size_t i = 0; i < layers_.size(); ++i) {
    shape = layers_[i]->build(shape, str_cat(i, ".", layers_[i]->kind(), "."), i, arena_);
    layer_output_shapes_.push_back(shape);
    backward_span_names_.push_back(str_cat("backward ", i, ".", layers_[i]->kind()));
  }
  output_shape_ = shape;
  fuse(device);
  arena_.allocate(device);
  for (auto& layer : layers_) {
    layer->bind(arena_);
    layer->attach(context_.get());
  }
  built_ = true;
}

void Model::set_layer_fusion(bool on) {
  MIRRORED_CHECK(!built_, "set_layer_fusion() after build()");
  fuse_layers_ = on;
}

void Model::fuse(Device device) {
  computed_by_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) computed_by_[i] = i;
  if (!fuse_layers_) return;
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<Layer*> following;
    for (size_t j = i + 1; j < layers_.size(); ++j) following.push_back(layers_[j].get());
    const size_t taken = layers_[i]->fuse_following(following, device);
    MIRRORED_CHECK(taken <= following.size(), "layer ", i, " took ", taken, " of the ", following.size(),
                   " layers after it");
    for (size_t j = i + 1; j <= i + taken; ++j) computed_by_[j] = i;
    i += taken;
  }
}

void Model::initialize(uint64_t seed) {
  MIRRORED_CHECK(built_, "initialize() before build()");
  // One stream for all weights, drawn in layer order: the same seed gives the same model
  // whatever the world size.
  Rng rng(seed, /*stream=*/1);
  if (device_.is_cpu()) {
    for (auto& layer : layers_) layer->initialize(rng);
    return;
  }
  // Layers write their initial values through host pointers: bind them to a host copy of
  // the arena, initialise (the same draws as on the CPU), copy it over once, rebind.
  Tensor on_device = arena_.flat_params();
  arena_.flat_params() = Tensor(on_device.shape(), DType::kF32, Device::cpu());
  for (auto& layer : layers_) layer->bind(arena_);
  for (auto& layer : layers_) layer->initialize(rng);
  kernels::copy(arena_.flat_params(), on_device);
  arena_.flat_params() = on_device;
  for (auto& layer : layers_) layer->bind(arena_);
}

void Model::set_first_sample(int64_t first_sample) {
  MIRRORED_CHECK(first_sample >= 0, "first sample ", first_sample);
  context_->first_sample = first_sample;
}

const Tensor& Model::forward(const Tensor& x, Mode mode) {
  MIRRORED_CHECK(built_, "forward() before build()");
  static const std::string kForward = "forward";
  Timeline::Span span(timeline_, kForward, "forward");
  const Tensor* out = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerClock clock(layer_timer_, i, /*backward=*/false);
    // A layer another one computes (computed_by): its output is already `out` (and its
    // clock, above, times nothing).
    if (computed_by_[i] == i) out = &layers_[i]->forward(*out, mode);
  }
  return *out;
}

void Model::backward(const Tensor& dloss_dout, const GradReadyHook& on_grads_ready) {
  MIRRORED_CHECK(built_, "backward() before build()");
  const Tensor* grad = &dloss_dout;
  for (size_t i = layers_.size(); i-- > 0;) {
    // Nothing upstream of layer 0 wants the gradient of the model's input. A layer another
    // one computes passes the gradient on as it is: that one's backward takes it.
    if (computed_by_[i] != i) {
      const LayerClock clock(layer_timer_, i, /*backward=*/true);  // a time of ~0, so every layer has one
    } else {
      Timeline::Span span(timeline_, backward_span_names_[i], "backward");
      const LayerClock clock(layer_timer_, i, /*backward=*/true);
      grad = &layers_[i]->backward(*grad, /*need_input_grad=*/i > 0);
    }
    if (on_grads_ready) on_grads_ready(i);
  }
}

std::string Model::summary() const {
  std::vector<int64_t> params_per_layer(layers_.size(), 0);
  for (const ParameterInfo& info : arena_.infos()) params_per_layer.at(info.layer) += shape_numel(info.shape);
  std::ostringstream out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string shape = i < layer_output_shapes_.size() ? shape_str(layer_output_shapes_[i]) : "?";
    out << i << "  " << layers_[i]->kind() << "  out " << shape << "  params " << params_per_layer[i]
        << "\n";
  }
  return out.str();
}

}  // namespace mirrored::nn
