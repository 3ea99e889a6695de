#pragma once
// Layers for images, NCHW: convolution, pooling, flatten, batch norm, dropout and the
// residual block. Per-sample shapes are [C, H, W].
#include <memory>

#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/layer.h"

namespace mirrored::nn {

// PyTorch's nn.Conv2d: weight [OC, C, K, K], optional bias, zero padding; initialised
// like PyTorch (kaiming_uniform(a=sqrt(5)): bound 1/sqrt(fan_in), the bias too).
class Conv2d final : public Layer {
 public:
  Conv2d(int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0, bool bias = true);
  std::string kind() const override { return "conv"; }
  double forward_flops(int64_t batch) const override { return static_cast<double>(batch) * flops_per_sample_; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  int64_t out_channels_;
  kernels::Conv2dParams params_;
  bool has_bias_;
  int64_t fan_in_ = 0;
  double flops_per_sample_ = 0.0;  // every output: fan_in multiply-adds
  size_t weight_index_ = 0, bias_index_ = 0;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor input_, output_, dinput_, workspace_;
};

// Max pooling (kernel, stride); the input index of every maximum is kept for backward.
class MaxPool2d final : public Layer {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);  // stride 0: = kernel
  std::string kind() const override { return "maxpool"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  const kernels::Pool2dParams& params() const { return params_; }

 private:
  kernels::Pool2dParams params_;
  Shape input_shape_;  // of the last forward
  Tensor output_, argmax_, dinput_;
};

// Average pooling; kernel 0 means the whole plane (global average pooling, output [C, 1, 1]).
class AvgPool2d final : public Layer {
 public:
  explicit AvgPool2d(int64_t kernel = 0, int64_t stride = 0, int64_t padding = 0);
  std::string kind() const override { return "avgpool"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  kernels::Pool2dParams params_;
  bool global_ = false;
  Shape input_shape_;
  Tensor output_, dinput_;
};

// [N, ...] -> [N, prod(...)], a view; backward reshapes the gradient back.
class Flatten final : public Layer {
 public:
  std::string kind() const override { return "flatten"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  Shape input_shape_;
  Tensor output_, dinput_;
};

// Batch normalisation over N, H, W for each channel (PyTorch's BatchNorm2d; any [C, ...]
// sample works). Training: batch statistics, running statistics updated with `momentum`
// (unbiased variance), as PyTorch. Evaluation: the running statistics. With `sync`, the
// batch statistics and the input gradient's sums are summed over all replicas through the
// model's CrossReplicaReducer, so the layer normalises over the global batch
// (SyncBatchNorm / Keras synchronized=True). Parameters "weight" (gamma, init 1) and
// "bias" (beta, 0); buffers "running_mean" (0) and "running_var" (1). On the CPU, a 2x2
// stride-2 max pool and a relu that follow it run inside it (fuse_following), in one pass
// over the full-size tensor each way instead of several.
class BatchNorm2d final : public Layer {
 public:
  explicit BatchNorm2d(bool sync = false, float eps = 1e-5f, float momentum = 0.1f);
  std::string kind() const override { return "batchnorm"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  size_t fuse_following(const std::vector<Layer*>& following, Device device) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  bool sync_;
  float eps_, momentum_;
  bool pools_and_relus_ = false;  // fuse_following took a 2x2 max pool and a relu
  Tensor argmax_;                 // the pool's, when it did
  int64_t channels_ = 0;
  size_t gamma_index_ = 0, beta_index_ = 0, mean_index_ = 0, var_index_ = 0;
  Tensor gamma_, beta_, dgamma_, dbeta_, running_mean_, running_var_;
  Tensor shift_, sums_, grad_sums_, mean_, invstd_;  // [C] / [2C + 1] work vectors
  Tensor input_, output_, dinput_;
  Mode mode_ = Mode::kEval;
  void reset_running_statistics();
  void sum_over_replicas(Tensor& sums);
  void take_statistics(const Tensor& x, Mode mode);
};

// Inverted dropout with probability p in training, the identity in evaluation. The mask
// of global sample k at a step depends on (run seed, step, layer, k) only: the same run
// gives the same masks, whatever the world size.
class Dropout final : public Layer {
 public:
  explicit Dropout(float p);
  std::string kind() const override { return "dropout"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  float p_;
  uint64_t layer_key_ = 0;  // hash of the layer's name prefix
  bool active_ = false;     // the last forward applied a mask
  Tensor mask_, output_, dinput_, passthrough_;
};

// The basic residual block of ResNet: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)),
// 3x3 convolutions, the first with `stride`; the shortcut is the identity, or a 1x1
// convolution with `stride` + batch norm when the shape changes. A composite layer: its
// sub-layers' parameters are named under its prefix ("3.resblock.conv1.weight").
class ResidualBlock final : public Layer {
 public:
  ResidualBlock(int64_t out_channels, int64_t stride, bool sync_batchnorm);
  ~ResidualBlock() override;
  std::string kind() const override { return "resblock"; }
  double forward_flops(int64_t batch) const override;
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  void attach(const RunContext* context) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  int64_t out_channels_, stride_;
  bool sync_;
  std::unique_ptr<Layer> conv1_, bn1_, relu1_, conv2_, bn2_, shortcut_conv_, shortcut_bn_, relu_out_;
  Tensor sum_, dinput_;
  template <typename F>
  void for_each_layer(F&& f);
};

}  // namespace mirrored::nn
