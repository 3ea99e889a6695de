#pragma once
// The two CPU convolution implementations behind cpu::conv2d_forward / conv2d_backward, and
// the choice between them. Internal to the CPU kernels (and their tests, which run both on
// the same cases and compare).
#include <string>
#include <string_view>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {

enum class ConvBackend { kIm2col, kOneDnn };
enum class ConvPass { kForward, kBackwardData, kBackwardWeights };

// Whether this build has oneDNN, and its version ("" when not).
bool onednn_built();
std::string onednn_version();
// For an environment variable set to "onednn" (MIRRORED_CPU_CONV, _GEMM, _BF16): an
// InputError naming it when this build has no oneDNN.
void require_onednn_build(std::string_view variable);

// The backend conv2d_forward / conv2d_backward use for one pass of this shape. The
// environment variable MIRRORED_CPU_CONV (auto, im2col or onednn; read once) overrides.
ConvBackend conv_backend(const ConvShape& s, ConvPass pass);
// Reads MIRRORED_CPU_CONV now: an InputError for a value it does not take.
void read_conv_setting();

// Both passes through one named backend (kOneDnn needs onednn_built()); otherwise the
// semantics of conv2d_forward / conv2d_backward: y and dx overwritten, dweight and dbias
// accumulated into, dx and dbias may be null.
// kBF16 runs oneDNN's bf16 primitives where bf16_gemm_backend() is kOneDnn (native bf16),
// and otherwise the float32 backend on inputs rounded to bfloat16: the same arithmetic
// (products of bfloat16 values are exact in float32), summed in float32.
void conv2d_forward_with(ConvBackend backend, const float* x, const float* weight, const float* bias,
                         const ConvShape& s, float* y, float* workspace, Precision precision = Precision::kF32);
void conv2d_backward_with(ConvBackend data_backend, ConvBackend weights_backend, const float* x,
                          const float* weight, const float* dy, const ConvShape& s, float* dx, float* dweight,
                          float* dbias, float* workspace, Precision precision = Precision::kF32);

// im2col + sgemm (conv.cpp). Backward: dx, dweight and dbias may each be null.
void im2col_conv2d_forward(const float* x, const float* weight, const float* bias, const ConvShape& s, float* y,
                           float* workspace);
void im2col_conv2d_backward(const float* x, const float* weight, const float* dy, const ConvShape& s, float* dx,
                            float* dweight, float* dbias, float* workspace);

// oneDNN (dnnl_conv.cpp; only when onednn_built()). No workspace: the blocked buffers are
// cached per shape and precision. Backward: dx, dweight and dbias may each be null. kBF16:
// x, weight and dy reordered into bfloat16 blocked buffers, outputs float32.
void onednn_conv2d_forward(const float* x, const float* weight, const float* bias, const ConvShape& s, float* y,
                           Precision precision = Precision::kF32);
void onednn_conv2d_backward(const float* x, const float* weight, const float* dy, const ConvShape& s, float* dx,
                            float* dweight, float* dbias, Precision precision = Precision::kF32);

}  // namespace mirrored::kernels::cpu
