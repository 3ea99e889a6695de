// Checked entry points of the convolution and pooling ops; their geometry is worked out
// and checked here once (ConvShape, PoolShape) for both implementations.
#include <algorithm>

#include "cpu/conv_backends.h"
#include "cpu/cpu_kernels.h"
#include "dispatch_checks.h"

namespace mirrored::kernels {
using namespace checks;
namespace {

ConvShape conv_shape(const char* op, const Tensor& x, const Tensor& weight, const Conv2dParams& p) {
  require_nchw(op, x);
  require_nchw(op, weight);
  MIRRORED_CHECK(p.stride >= 1 && p.padding >= 0 && p.kernel_h >= 1 && p.kernel_w >= 1, op, ": stride ",
                 p.stride, ", padding ", p.padding, ", kernel ", p.kernel_h, "x", p.kernel_w);
  MIRRORED_CHECK(weight.dim(1) == x.dim(1) && weight.dim(2) == p.kernel_h && weight.dim(3) == p.kernel_w, op,
                 ": weight ", shape_str(weight.shape()), " for input ", shape_str(x.shape()), " and kernel ",
                 p.kernel_h, "x", p.kernel_w);
  ConvShape s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  s.h = x.dim(2);
  s.w = x.dim(3);
  s.oc = weight.dim(0);
  s.kh = p.kernel_h;
  s.kw = p.kernel_w;
  s.stride = p.stride;
  s.pad = p.padding;
  s.oh = conv_output_size(s.h, s.kh, s.stride, s.pad);
  s.ow = conv_output_size(s.w, s.kw, s.stride, s.pad);
  MIRRORED_CHECK(s.oh > 0 && s.ow > 0, op, ": kernel ", s.kh, "x", s.kw, " does not fit input ",
                 shape_str(x.shape()), " with padding ", s.pad);
  return s;
}

PoolShape pool_shape(const char* op, const Tensor& x, const Pool2dParams& p) {
  require_nchw(op, x);
  MIRRORED_CHECK(p.stride >= 1 && p.kernel_h >= 1 && p.kernel_w >= 1 && p.padding >= 0 &&
                     2 * p.padding <= std::min(p.kernel_h, p.kernel_w),
                 op, ": kernel ", p.kernel_h, "x", p.kernel_w, ", stride ", p.stride, ", padding ", p.padding,
                 " (padding may be at most half the kernel)");
  PoolShape s;
  s.planes = x.dim(0) * x.dim(1);
  s.h = x.dim(2);
  s.w = x.dim(3);
  s.kh = p.kernel_h;
  s.kw = p.kernel_w;
  s.stride = p.stride;
  s.pad = p.padding;
  s.oh = conv_output_size(s.h, s.kh, s.stride, s.pad);
  s.ow = conv_output_size(s.w, s.kw, s.stride, s.pad);
  MIRRORED_CHECK(s.oh > 0 && s.ow > 0, op, ": window ", s.kh, "x", s.kw, " does not fit input ",
                 shape_str(x.shape()));
  return s;
}

}  // namespace

int64_t conv_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t padding) {
  if (stride <= 0) return 0;
  const int64_t span = input + 2 * padding - kernel;
  return span < 0 ? 0 : span / stride + 1;
}

void conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, const Conv2dParams& params,
                    Tensor& y, Tensor& workspace, Precision precision) {
  const char* op = "conv2d_forward";
  const bool cuda = on_cuda(op, {&x, &weight, &y});
  require_f32(op, {&x, &weight, &y});
  const ConvShape s = conv_shape(op, x, weight, params);
  if (bias) {
    require_f32(op, {bias});
    require_vector(op, *bias, s.oc, "bias");
  }
  MIRRORED_CHECK(y.shape() == Shape({s.n, s.oc, s.oh, s.ow}), op, ": y ", shape_str(y.shape()), ", expected [",
                 s.n, ", ", s.oc, ", ", s.oh, ", ", s.ow, "]");
  // On CUDA `workspace` is not used: cuDNN's plans share one workspace per device.
  if (cuda) MIRRORED_ON_CUDA(x, conv2d_forward, x.data<float>(), weight.data<float>(),
                             bias ? bias->data<float>() : nullptr, s, y.data<float>(), precision);
  ensure_shape(workspace, {cpu::conv2d_workspace_floats(s)}, DType::kF32, x.device());
  cpu::conv2d_forward(x.data<float>(), weight.data<float>(), bias ? bias->data<float>() : nullptr, s,
                      y.data<float>(), workspace.data<float>(), precision);
}

void conv2d_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Conv2dParams& params,
                     Tensor* dx, Tensor& dweight, Tensor* dbias, Tensor& workspace, Precision precision) {
  const char* op = "conv2d_backward";
  const bool cuda = on_cuda(op, {&x, &weight, &dy, &dweight});
  require_f32(op, {&x, &weight, &dy, &dweight});
  const ConvShape s = conv_shape(op, x, weight, params);
  MIRRORED_CHECK(dy.shape() == Shape({s.n, s.oc, s.oh, s.ow}), op, ": dy ", shape_str(dy.shape()),
                 ", expected [", s.n, ", ", s.oc, ", ", s.oh, ", ", s.ow, "]");
  require_same_shape(op, weight, dweight);
  if (dx) {
    require_f32(op, {dx});
    require_same_shape(op, x, *dx);
  }
  if (dbias) {
    require_f32(op, {dbias});
    require_vector(op, *dbias, s.oc, "dbias");
  }
  if (cuda)
    MIRRORED_ON_CUDA(x, conv2d_backward, x.data<float>(), weight.data<float>(), dy.data<float>(), s,
                     dx ? dx->data<float>() : nullptr, dweight.data<float>(), dbias ? dbias->data<float>() : nullptr,
                     precision);
  ensure_shape(workspace, {cpu::conv2d_workspace_floats(s)}, DType::kF32, x.device());
  cpu::conv2d_backward(x.data<float>(), weight.data<float>(), dy.data<float>(), s,
                       dx ? dx->data<float>() : nullptr, dweight.data<float>(),
                       dbias ? dbias->data<float>() : nullptr, workspace.data<float>(), precision);
}

void max_pool2d_forward(const Tensor& x, const Pool2dParams& params, Tensor& y, Tensor& argmax) {
  const char* op = "max_pool2d_forward";
  const bool cuda = on_cuda(op, {&x, &y, &argmax});
  require_f32(op, {&x, &y});
  const PoolShape s = pool_shape(op, x, params);
  const Shape out = {x.dim(0), x.dim(1), s.oh, s.ow};
  MIRRORED_CHECK(y.shape() == out && argmax.shape() == out && argmax.dtype() == DType::kI32, op, ": y ",
                 shape_str(y.shape()), " and int32 argmax ", shape_str(argmax.shape()), ", expected ",
                 shape_str(out));
  if (cuda) MIRRORED_ON_CUDA(x, max_pool2d_forward, x.data<float>(), s, y.data<float>(), argmax.data<int32_t>());
  cpu::max_pool2d_forward(x.data<float>(), s, y.data<float>(), argmax.data<int32_t>());
}

void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, const Pool2dParams& params, Tensor& dx) {
  const char* op = "max_pool2d_backward";
  const bool cuda = on_cuda(op, {&dy, &argmax, &dx});
  require_f32(op, {&dy, &dx});
  const PoolShape s = pool_shape(op, dx, params);
  MIRRORED_CHECK(dy.shape() == Shape({dx.dim(0), dx.dim(1), s.oh, s.ow}), op, ": dy ", shape_str(dy.shape()),
                 " for dx ", shape_str(dx.shape()));
  require_same_shape(op, dy, argmax);
  MIRRORED_CHECK(argmax.dtype() == DType::kI32, op, ": argmax must be int32, got ", dtype_name(argmax.dtype()));
  if (cuda) MIRRORED_ON_CUDA(dy, max_pool2d_backward, dy.data<float>(), argmax.data<int32_t>(), s, dx.data<float>());
  cpu::max_pool2d_backward(dy.data<float>(), argmax.data<int32_t>(), s.planes, s.h * s.w, s.oh * s.ow,
                           dx.data<float>());
}

void avg_pool2d_forward(const Tensor& x, const Pool2dParams& params, Tensor& y) {
  const char* op = "avg_pool2d_forward";
  const bool cuda = on_cuda(op, {&x, &y});
  require_f32(op, {&x, &y});
  const PoolShape s = pool_shape(op, x, params);
  MIRRORED_CHECK(y.shape() == Shape({x.dim(0), x.dim(1), s.oh, s.ow}), op, ": y ", shape_str(y.shape()));
  if (cuda) MIRRORED_ON_CUDA(x, avg_pool2d_forward, x.data<float>(), s, y.data<float>());
  cpu::avg_pool2d_forward(x.data<float>(), s, y.data<float>());
}

void avg_pool2d_backward(const Tensor& dy, const Pool2dParams& params, Tensor& dx) {
  const char* op = "avg_pool2d_backward";
  const bool cuda = on_cuda(op, {&dy, &dx});
  require_f32(op, {&dy, &dx});
  const PoolShape s = pool_shape(op, dx, params);
  MIRRORED_CHECK(dy.shape() == Shape({dx.dim(0), dx.dim(1), s.oh, s.ow}), op, ": dy ", shape_str(dy.shape()),
                 " for dx ", shape_str(dx.shape()));
  if (cuda) MIRRORED_ON_CUDA(dy, avg_pool2d_backward, dy.data<float>(), s, dx.data<float>());
  cpu::avg_pool2d_backward(dy.data<float>(), s, dx.data<float>());
}

}  // namespace mirrored::kernels
