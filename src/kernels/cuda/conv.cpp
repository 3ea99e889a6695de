// Convolution on CUDA tensors: the ops of kernels.h mapped onto the cuDNN plans of
// cudnn_conv.cpp (one plan per shape, chosen once; one workspace per device).
#include <climits>

#include "cuda_kernels.h"
#include "cudnn_ops.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda {
namespace {

// kernels.h has one stride and one padding for both dimensions; cuDNN takes them apart.
dnn::Conv2dShape dnn_shape(const ConvShape& s) {
  MIRRORED_CHECK(s.stride <= INT_MAX && s.pad <= INT_MAX, "convolution stride ", s.stride, " or padding ", s.pad,
                 " exceeds cuDNN's int");
  dnn::Conv2dShape d;
  d.n = s.n;
  d.c = s.c;
  d.h = s.h;
  d.w = s.w;
  d.k = s.oc;
  d.r = s.kh;
  d.s = s.kw;
  d.pad_h = d.pad_w = static_cast<int>(s.pad);
  d.stride_h = d.stride_w = static_cast<int>(s.stride);
  return d;
}

const dnn::Conv2dPlan& plan_for(const Context& ctx, const ConvShape& s) {
  const dnn::Conv2dPlan& plan = dnn::conv_plan(ctx.device, dnn_shape(s));
  MIRRORED_CHECK(plan.out_h() == s.oh && plan.out_w() == s.ow, "cuDNN's convolution output ", plan.out_h(), "x",
                 plan.out_w(), " differs from ", s.oh, "x", s.ow);
  return plan;
}

}  // namespace

namespace {
// x rounded to bfloat16 values into the context's scratch `which`.
const float* rounded(Context& ctx, int which, const float* x, int64_t n) {
  auto* out = static_cast<float*>(ctx.bf16_scratch_of_size(which, static_cast<size_t>(n) * sizeof(float)));
  round_to_bf16(x, out, n, ctx.stream());
  return out;
}
}  // namespace

void conv2d_forward(Context& ctx, const float* x, const float* weight, const float* bias, const ConvShape& s,
                    float* y, Precision precision) {
  if (s.n == 0) return;  // cuDNN rejects empty tensors; there is nothing to compute
  if (precision == Precision::kBF16) {
    x = rounded(ctx, 0, x, s.n * s.c * s.h * s.w);
    weight = rounded(ctx, 1, weight, s.oc * s.c * s.kh * s.kw);
  }
  plan_for(ctx, s).forward(x, weight, bias, y);
}

void conv2d_backward(Context& ctx, const float* x, const float* weight, const float* dy, const ConvShape& s,
                     float* dx, float* dweight, float* dbias, Precision precision) {
  if (s.n == 0) return;  // no samples: nothing to accumulate, an empty dx
  if (precision == Precision::kBF16) {  // dbias sums the rounded dy, as on the CPU
    x = rounded(ctx, 0, x, s.n * s.c * s.h * s.w);
    if (dx) weight = rounded(ctx, 1, weight, s.oc * s.c * s.kh * s.kw);
    dy = rounded(ctx, 2, dy, s.n * s.oc * s.oh * s.ow);
  }
  const dnn::Conv2dPlan& plan = plan_for(ctx, s);
  plan.backward_filter(x, dy, dweight, dbias);  // dW += ..., dbias += ... (beta = 1)
  if (dx) plan.backward_data(weight, dy, dx);   // dx = ... (beta = 0), as the CPU kernel
}

}  // namespace mirrored::kernels::cuda
