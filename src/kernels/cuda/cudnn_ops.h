#pragma once
// cuDNN wrappers for the convolutional ops (convolution, pooling, batch norm, activation),
// NCHW float32 on raw device buffers. An internal module: the convolution ops of kernels.h
// run on CUDA tensors through conv_plan() (conv.cpp); its tests call it directly. Pooling
// and batch norm in kernels.h have their own kernels (pool.cu, batch_norm.cu), because
// their contracts are not cuDNN's: max pooling returns its argmax, average pooling counts
// the padding, and batch norm comes in pieces so that sync batch norm can sum across
// replicas between them. The Pool2d, BatchNorm2d and Activation wrappers below are not used
// by the op set.
//
// Everything runs on the device's compute stream, like the rest of kernels::cuda. Math is
// plain float32 FMA (no TF32 tensor cores) so results agree with the CPU kernels to ~1e-5.
// A convolution's algorithms are chosen once per shape (conv_plan()) and the workspace of
// the device's context, grown to the largest plan's need, is reused by every call.
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "cuda_kernels.h"
#include "mirrored/core/cuda_resources.h"

namespace mirrored::kernels::cuda::dnn {

// ---- descriptors ------------------------------------------------------------------------
// A 4-D NCHW float tensor descriptor.
class TensorDesc {
 public:
  TensorDesc() = default;
  TensorDesc(int64_t n, int64_t c, int64_t h, int64_t w);
  ~TensorDesc();
  TensorDesc(TensorDesc&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
  TensorDesc& operator=(TensorDesc&& other) noexcept;
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

// ---- convolution ------------------------------------------------------------------------
struct Conv2dShape {
  int64_t n = 1, c = 1, h = 1, w = 1;   // input
  int64_t k = 1, r = 1, s = 1;          // filters [k, c, r, s]
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  bool operator==(const Conv2dShape&) const = default;
};

// The most workspace a convolution pass may ask for (also at most a quarter of the free
// device memory when planned): an algorithm that wants more gives way to the next one.
constexpr size_t kMaxConvWorkspaceBytes = size_t{1} << 30;

enum class AlgoSearch {
  kHeuristic,  // cudnnGet*Algorithm_v7: no trial runs, reproducible choice (the default)
  kBenchmark,  // cudnnFind*Algorithm: times the candidates once, like torch's benchmark=True
};

// One convolution shape with its algorithms chosen. Per pass, the first of cuDNN's
// candidates that succeeded, is deterministic (gradients do not change from run to run),
// runs in FMA math (no TF32), and whose workspace (cudnnGet*WorkspaceSize) fits under
// kMaxConvWorkspaceBytes and can be allocated; otherwise the next candidate.
class Conv2dPlan {
 public:
  Conv2dPlan(int device, const Conv2dShape& shape, AlgoSearch search);
  ~Conv2dPlan();
  Conv2dPlan(const Conv2dPlan&) = delete;
  Conv2dPlan& operator=(const Conv2dPlan&) = delete;

  const Conv2dShape& shape() const { return shape_; }
  int64_t out_h() const { return out_h_; }
  int64_t out_w() const { return out_w_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

  // y = conv(x, w) (+ bias[k] when given).
  void forward(const float* x, const float* w, const float* bias, float* y) const;
  // dx = conv_transpose(dy, w) (overwrites dx).
  void backward_data(const float* w, const float* dy, float* dx) const;
  // dw += conv_grad(x, dy); dbias += sum over n, h, w of dy (when dbias is given).
  void backward_filter(const float* x, const float* dy, float* dw, float* dbias) const;

 private:
  void describe_tensors();
  void choose_algorithms(AlgoSearch search);

  int device_;
  Conv2dShape shape_;
  int64_t out_h_ = 0, out_w_ = 0;
  TensorDesc x_desc_, y_desc_, bias_desc_;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  size_t workspace_bytes_ = 0;
};

// The plans of one device context (cuda::Context::conv_plans), by shape: layers ask for
// theirs every step; they live as long as the context.
class ConvPlanCache {
 public:
  ConvPlanCache();
  ~ConvPlanCache();
  const Conv2dPlan& get(int device, const Conv2dShape& shape, AlgoSearch search);
  size_t created() const;

 private:
  struct Plans;
  std::unique_ptr<Plans> plans_;
};

// The plan for `shape` in the live context of `device`, created (algorithms chosen) on
// first request.
const Conv2dPlan& conv_plan(int device, const Conv2dShape& shape, AlgoSearch search = AlgoSearch::kHeuristic);
// How many plans that context has created (tests check that a shape is planned only once).
size_t conv_plans_created(int device);

// ---- pooling ----------------------------------------------------------------------------
enum class PoolMode { kMax, kAverage };  // average excludes padding, like count_include_pad=False
class Pool2d {
 public:
  Pool2d(int device, PoolMode mode, int64_t n, int64_t c, int64_t h, int64_t w, int window, int stride, int pad);
  ~Pool2d();
  Pool2d(const Pool2d&) = delete;
  Pool2d& operator=(const Pool2d&) = delete;
  int64_t out_h() const { return out_h_; }
  int64_t out_w() const { return out_w_; }
  void forward(const float* x, float* y) const;
  void backward(const float* x, const float* y, const float* dy, float* dx) const;  // overwrites dx

 private:
  int device_;
  int64_t out_h_ = 0, out_w_ = 0;
  TensorDesc x_desc_, y_desc_;
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

// ---- batch normalisation (spatial: one scale/bias per channel) --------------------------
class BatchNorm2d {
 public:
  BatchNorm2d(int device, int64_t n, int64_t c, int64_t h, int64_t w, double epsilon, double momentum);
  BatchNorm2d(const BatchNorm2d&) = delete;
  BatchNorm2d& operator=(const BatchNorm2d&) = delete;
  // Training: normalises with the batch statistics, updates the running ones
  // (running = (1 - momentum) running + momentum batch, PyTorch's convention, unbiased
  // variance) and saves mean and 1/sqrt(var + eps) for backward.
  void forward_training(const float* x, const float* scale, const float* bias, float* y, float* running_mean,
                        float* running_var, float* save_mean, float* save_inv_std) const;
  void forward_inference(const float* x, const float* scale, const float* bias, const float* running_mean,
                         const float* running_var, float* y) const;
  // dx overwritten; dscale and dbias accumulate (parameter gradients add up).
  void backward(const float* x, const float* dy, const float* scale, const float* save_mean,
                const float* save_inv_std, float* dx, float* dscale, float* dbias) const;

 private:
  int device_;
  double epsilon_, momentum_;
  TensorDesc x_desc_, param_desc_;
};

// ---- activation -------------------------------------------------------------------------
enum class ActivationMode { kRelu, kSigmoid, kTanh };
class Activation {
 public:
  Activation(int device, ActivationMode mode, int64_t n, int64_t c, int64_t h, int64_t w);
  ~Activation();
  Activation(const Activation&) = delete;
  Activation& operator=(const Activation&) = delete;
  void forward(const float* x, float* y) const;
  void backward(const float* x, const float* y, const float* dy, float* dx) const;  // overwrites dx

 private:
  int device_;
  TensorDesc desc_;
  cudnnActivationDescriptor_t act_ = nullptr;
};

}  // namespace mirrored::kernels::cuda::dnn
