#include <vector>

#include "mirrored/nn/conv.h"
#include "mirrored/nn/layers.h"

namespace mirrored::nn {

BatchNorm2d::BatchNorm2d(bool sync, float eps, float momentum) : sync_(sync), eps_(eps), momentum_(momentum) {
  MIRRORED_CHECK(eps > 0.0f && momentum >= 0.0f && momentum <= 1.0f, "BatchNorm2d eps ", eps, ", momentum ",
                 momentum);
}

Shape BatchNorm2d::build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) {
  MIRRORED_CHECK(!input.empty() && input[0] > 0, "BatchNorm2d expects [C, ...] samples, got ", shape_str(input));
  channels_ = input[0];
  gamma_index_ = arena.declare(prefix + "weight", {channels_}, layer_index);
  beta_index_ = arena.declare(prefix + "bias", {channels_}, layer_index);
  mean_index_ = arena.declare_buffer(prefix + "running_mean", {channels_}, layer_index);
  var_index_ = arena.declare_buffer(prefix + "running_var", {channels_}, layer_index);
  return input;
}

void BatchNorm2d::bind(ParameterArena& arena) {
  gamma_ = arena.param(gamma_index_);
  beta_ = arena.param(beta_index_);
  dgamma_ = arena.grad(gamma_index_);
  dbeta_ = arena.grad(beta_index_);
  running_mean_ = arena.buffer(mean_index_);
  running_var_ = arena.buffer(var_index_);
  const Device device = gamma_.device();
  for (Tensor* t : {&shift_, &mean_, &invstd_}) *t = Tensor({channels_}, DType::kF32, device);
  sums_ = Tensor({2 * channels_ + 1}, DType::kF32, device);
  grad_sums_ = Tensor({2 * channels_ + 1}, DType::kF32, device);
  // Buffers are set here, on every replica alike, not in initialize() (chief only).
  reset_running_statistics();
}

void BatchNorm2d::reset_running_statistics() {
  // Through copies: the buffers live on the model's device, which may be a GPU.
  running_mean_.zero();
  kernels::copy(Tensor::from(std::vector<float>(static_cast<size_t>(channels_), 1.0f), {channels_}), running_var_);
}

void BatchNorm2d::initialize(Rng& /*rng*/) {
  // PyTorch's reset_parameters: gamma 1, beta 0 (no random draws, so the other layers'
  // initial weights do not depend on whether batch norm is on).
  float* gamma = gamma_.data<float>();
  for (int64_t c = 0; c < channels_; ++c) gamma[c] = 1.0f;
  beta_.zero();
  reset_running_statistics();
}

void BatchNorm2d::sum_over_replicas(Tensor& sums) {
  if (sync_ && context_ != nullptr && context_->reducer != nullptr) context_->reducer->sum(sums);
}

size_t BatchNorm2d::fuse_following(const std::vector<Layer*>& following, Device device) {
  if (!device.is_cpu() || following.size() < 2) return 0;
  const auto* pool = dynamic_cast<const MaxPool2d*>(following[0]);
  if (pool == nullptr || dynamic_cast<const ReLU*>(following[1]) == nullptr) return 0;
  const kernels::Pool2dParams& p = pool->params();
  if (p.kernel_h != 2 || p.kernel_w != 2 || p.stride != 2 || p.padding != 0) return 0;
  pools_and_relus_ = true;
  return 2;
}

void BatchNorm2d::take_statistics(const Tensor& x, Mode mode) {
  if (mode == Mode::kTrain) {
    // Sums shifted by the running mean (the same on every replica) keep the variance
    // from cancelling; the copy keeps the shift fixed while the running mean updates.
    kernels::copy(running_mean_, shift_);
    kernels::batch_norm_sums(x, shift_, sums_);
    sum_over_replicas(sums_);
    kernels::batch_norm_statistics(sums_, shift_, eps_, momentum_, mean_, invstd_, running_mean_, running_var_);
  } else {
    kernels::batch_norm_inference_statistics(running_mean_, running_var_, eps_, mean_, invstd_);
  }
}

const Tensor& BatchNorm2d::forward(const Tensor& x, Mode mode) {
  MIRRORED_CHECK(x.rank() >= 2 && x.dim(1) == channels_, "BatchNorm2d expects [N, ", channels_, ", ...], got ",
                 shape_str(x.shape()));
  input_ = x;
  mode_ = mode;
  take_statistics(x, mode);
  if (pools_and_relus_) {
    const Shape pooled = {x.dim(0), x.dim(1), x.dim(2) / 2, x.dim(3) / 2};
    ensure_shape(output_, pooled, DType::kF32, x.device());
    ensure_shape(argmax_, pooled, DType::kI32, x.device());
    kernels::batch_norm_max_pool_relu_forward(x, mean_, invstd_, gamma_, beta_, output_, argmax_);
    return output_;
  }
  ensure_shape(output_, x.shape(), DType::kF32, x.device());
  kernels::batch_norm_apply(x, mean_, invstd_, gamma_, beta_, output_);
  return output_;
}

const Tensor& BatchNorm2d::backward(const Tensor& dy, bool need_input_grad) {
  MIRRORED_CHECK(mode_ == Mode::kTrain, "BatchNorm2d backward after an evaluation-mode forward");
  if (pools_and_relus_)
    kernels::batch_norm_max_pool_relu_backward_sums(input_, output_, dy, argmax_, mean_, invstd_, grad_sums_);
  else
    kernels::batch_norm_backward_sums(input_, dy, mean_, invstd_, grad_sums_);
  // Parameter gradients from this replica's samples; the gradient all-reduce averages them.
  Tensor dy_sum = grad_sums_.view(0, {channels_});
  Tensor dy_xhat_sum = grad_sums_.view(channels_, {channels_});
  kernels::axpy(1.0f, dy_xhat_sum, dgamma_);
  kernels::axpy(1.0f, dy_sum, dbeta_);
  if (!need_input_grad) return dinput_;
  // The input gradient needs the sums over the whole (global) batch the statistics came from.
  sum_over_replicas(grad_sums_);
  ensure_shape(dinput_, input_.shape(), DType::kF32, dy.device());
  if (pools_and_relus_)
    kernels::batch_norm_max_pool_relu_backward_input(input_, output_, dy, argmax_, mean_, invstd_, gamma_,
                                                     grad_sums_, dinput_);
  else
    kernels::batch_norm_backward_input(input_, dy, mean_, invstd_, gamma_, grad_sums_, dinput_);
  return dinput_;
}

}  // namespace mirrored::nn
