#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/conv.h"
#include "mirrored/nn/layers.h"

namespace mirrored::nn {

ResidualBlock::ResidualBlock(int64_t out_channels, int64_t stride, bool sync_batchnorm)
    : out_channels_(out_channels), stride_(stride), sync_(sync_batchnorm) {
  MIRRORED_CHECK(out_channels > 0 && stride > 0, "ResidualBlock(", out_channels, ", stride ", stride, ")");
  // Convolutions feeding a batch norm need no bias: the norm's beta takes its place.
  conv1_ = std::make_unique<Conv2d>(out_channels, 3, stride, 1, /*bias=*/false);
  bn1_ = std::make_unique<BatchNorm2d>(sync_batchnorm);
  relu1_ = std::make_unique<ReLU>();
  conv2_ = std::make_unique<Conv2d>(out_channels, 3, 1, 1, /*bias=*/false);
  bn2_ = std::make_unique<BatchNorm2d>(sync_batchnorm);
  relu_out_ = std::make_unique<ReLU>();
}

ResidualBlock::~ResidualBlock() = default;

template <typename F>
void ResidualBlock::for_each_layer(F&& f) {
  for (auto* layer : {&conv1_, &bn1_, &relu1_, &conv2_, &bn2_, &shortcut_conv_, &shortcut_bn_, &relu_out_})
    if (*layer) f(**layer);
}

double ResidualBlock::forward_flops(int64_t batch) const {
  double flops = 0.0;
  for (const auto* layer : {&conv1_, &conv2_, &shortcut_conv_})
    if (*layer) flops += (*layer)->forward_flops(batch);
  return flops;
}

Shape ResidualBlock::build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) {
  MIRRORED_CHECK(input.size() == 3, "ResidualBlock expects [C, H, W] samples, got ", shape_str(input));
  if (stride_ != 1 || input[0] != out_channels_) {
    shortcut_conv_ = std::make_unique<Conv2d>(out_channels_, 1, stride_, 0, /*bias=*/false);
    shortcut_bn_ = std::make_unique<BatchNorm2d>(sync_);
  }
  Shape shape = conv1_->build(input, prefix + "conv1.", layer_index, arena);
  shape = bn1_->build(shape, prefix + "bn1.", layer_index, arena);
  shape = relu1_->build(shape, prefix + "relu1.", layer_index, arena);
  shape = conv2_->build(shape, prefix + "conv2.", layer_index, arena);
  shape = bn2_->build(shape, prefix + "bn2.", layer_index, arena);
  if (shortcut_conv_) {
    Shape shortcut = shortcut_conv_->build(input, prefix + "shortcut.conv.", layer_index, arena);
    shortcut = shortcut_bn_->build(shortcut, prefix + "shortcut.bn.", layer_index, arena);
    MIRRORED_CHECK(shortcut == shape, "ResidualBlock shortcut ", shape_str(shortcut), " vs main path ",
                   shape_str(shape));
  }
  return relu_out_->build(shape, prefix + "relu.", layer_index, arena);
}

void ResidualBlock::bind(ParameterArena& arena) {
  for_each_layer([&](Layer& layer) { layer.bind(arena); });
}

void ResidualBlock::initialize(Rng& rng) {
  for_each_layer([&](Layer& layer) { layer.initialize(rng); });
}

void ResidualBlock::attach(const RunContext* context) {
  Layer::attach(context);
  for_each_layer([&](Layer& layer) { layer.attach(context); });
}

const Tensor& ResidualBlock::forward(const Tensor& x, Mode mode) {
  const Tensor* h = &conv1_->forward(x, mode);
  h = &bn1_->forward(*h, mode);
  h = &relu1_->forward(*h, mode);
  h = &conv2_->forward(*h, mode);
  h = &bn2_->forward(*h, mode);
  const Tensor* shortcut = &x;
  if (shortcut_conv_) shortcut = &shortcut_bn_->forward(shortcut_conv_->forward(x, mode), mode);
  ensure_shape(sum_, h->shape(), DType::kF32, x.device());
  kernels::add(*h, *shortcut, sum_);
  return relu_out_->forward(sum_, mode);
}

const Tensor& ResidualBlock::backward(const Tensor& dy, bool need_input_grad) {
  const Tensor& dsum = relu_out_->backward(dy, true);
  const Tensor* g = &bn2_->backward(dsum, true);
  g = &conv2_->backward(*g, true);
  g = &relu1_->backward(*g, true);
  g = &bn1_->backward(*g, true);
  g = &conv1_->backward(*g, need_input_grad);
  const Tensor* gs = &dsum;
  if (shortcut_conv_) gs = &shortcut_conv_->backward(shortcut_bn_->backward(dsum, true), need_input_grad);
  if (!need_input_grad) return dinput_;
  ensure_shape(dinput_, g->shape(), DType::kF32, dy.device());
  kernels::add(*g, *gs, dinput_);
  return dinput_;
}

}  // namespace mirrored::nn
