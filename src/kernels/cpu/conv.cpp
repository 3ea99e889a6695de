// Convolution as a matrix product over BLAS (im2col): the input patches of a chunk of
// samples are unrolled into a [C*KH*KW, chunk*OH*OW] matrix so that one sgemm computes
// every output channel of every pixel of the chunk.
//
// Chunks, not the whole batch: a chunk's unrolled patches (~1 MiB) stay in cache between
// im2col writing them and sgemm reading them, where a whole batch's (13 MiB for the
// second layer of the cnn at 64 samples) would go through memory twice. Backward unrolls
// the chunk again instead of keeping the forward's: recomputing from cache is cheaper
// than storing and re-reading the whole batch.
//
// oneDNN's blocked-layout kernels (dnnl_conv.cpp) are faster on most shapes; conv_backend
// below picks per pass.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "bf16_backends.h"
#include "conv_backends.h"
#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::kernels::cpu {
namespace {

// Target size of one chunk's unrolled patches, in floats (1 MiB).
constexpr int64_t kChunkFloats = int64_t{1} << 18;

int64_t chunk_samples(const ConvShape& s) {
  const int64_t per_sample = s.c * s.kh * s.kw * s.oh * s.ow;
  return std::clamp<int64_t>(kChunkFloats / std::max<int64_t>(per_sample, 1), 1, std::max<int64_t>(s.n, 1));
}

// The valid output range [lo, hi) along one dimension for kernel offset `k`: outputs
// whose input coordinate o*stride - pad + k falls inside [0, size).
void valid_range(int64_t size, int64_t out, int64_t stride, int64_t pad, int64_t k, int64_t& lo, int64_t& hi) {
  lo = pad - k > 0 ? (pad - k + stride - 1) / stride : 0;
  hi = size + pad - k > 0 ? (size + pad - k + stride - 1) / stride : 0;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
}

// cols[(c, i, j), (n, oy, ox)] = x[n, c, oy*stride - pad + i, ox*stride - pad + j] or 0.
void im2col(const float* x, int64_t samples, const ConvShape& s, float* cols) {
  const int64_t ohw = s.oh * s.ow, ld = samples * ohw, in_plane = s.h * s.w;
  for (int64_t c = 0; c < s.c; ++c) {
    for (int64_t i = 0; i < s.kh; ++i) {
      int64_t y_lo, y_hi;
      valid_range(s.h, s.oh, s.stride, s.pad, i, y_lo, y_hi);
      for (int64_t j = 0; j < s.kw; ++j) {
        int64_t x_lo, x_hi;
        valid_range(s.w, s.ow, s.stride, s.pad, j, x_lo, x_hi);
        float* row = cols + ((c * s.kh + i) * s.kw + j) * ld;
        for (int64_t n = 0; n < samples; ++n) {
          const float* plane = x + (n * s.c + c) * in_plane;
          float* out = row + n * ohw;
          std::fill(out, out + y_lo * s.ow, 0.0f);
          for (int64_t oy = y_lo; oy < y_hi; ++oy) {
            const float* in = plane + (oy * s.stride - s.pad + i) * s.w;  // input row
            float* o = out + oy * s.ow;
            std::fill(o, o + x_lo, 0.0f);
            if (s.stride == 1) {
              // A loop, not memcpy: rows are short (8-24 floats here) and a call per row costs more.
              const float* src = in + (j - s.pad);
              for (int64_t ox = x_lo; ox < x_hi; ++ox) o[ox] = src[ox];
            } else {
              for (int64_t ox = x_lo; ox < x_hi; ++ox) o[ox] = in[ox * s.stride - s.pad + j];
            }
            std::fill(o + x_hi, o + s.ow, 0.0f);
          }
          std::fill(out + y_hi * s.ow, out + ohw, 0.0f);
        }
      }
    }
  }
}

// The adjoint of im2col: dx[n, c, iy, ix] += every cols entry that was copied from there.
void col2im(const float* cols, int64_t samples, const ConvShape& s, float* dx) {
  const int64_t ohw = s.oh * s.ow, ld = samples * ohw, in_plane = s.h * s.w;
  for (int64_t c = 0; c < s.c; ++c) {
    for (int64_t i = 0; i < s.kh; ++i) {
      int64_t y_lo, y_hi;
      valid_range(s.h, s.oh, s.stride, s.pad, i, y_lo, y_hi);
      for (int64_t j = 0; j < s.kw; ++j) {
        int64_t x_lo, x_hi;
        valid_range(s.w, s.ow, s.stride, s.pad, j, x_lo, x_hi);
        const float* row = cols + ((c * s.kh + i) * s.kw + j) * ld;
        for (int64_t n = 0; n < samples; ++n) {
          float* plane = dx + (n * s.c + c) * in_plane;
          const float* src = row + n * ohw;
          for (int64_t oy = y_lo; oy < y_hi; ++oy) {
            float* out = plane + (oy * s.stride - s.pad + i) * s.w;  // input row
            const float* o = src + oy * s.ow;
            const int64_t shift = j - s.pad;
            if (s.stride == 1) {
              for (int64_t ox = x_lo; ox < x_hi; ++ox) out[ox + shift] += o[ox];
            } else {
              for (int64_t ox = x_lo; ox < x_hi; ++ox) out[ox * s.stride + shift] += o[ox];
            }
          }
        }
      }
    }
  }
}

}  // namespace

int64_t conv2d_workspace_floats(const ConvShape& s) {
  const int64_t chunk = chunk_samples(s), ohw = s.oh * s.ow;
  // Unrolled patches, then the chunk's output in [OC, chunk*OH*OW] order.
  return chunk * ohw * (s.c * s.kh * s.kw + s.oc);
}

void im2col_conv2d_forward(const float* x, const float* weight, const float* bias, const ConvShape& s, float* y,
                           float* workspace) {
  const int64_t chunk = chunk_samples(s), ohw = s.oh * s.ow, k = s.c * s.kh * s.kw;
  float* cols = workspace;
  float* product = workspace + chunk * ohw * k;
  for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
    const int64_t samples = std::min(chunk, s.n - n0), ld = samples * ohw;
    im2col(x + n0 * s.c * s.h * s.w, samples, s, cols);
    float* y0 = y + n0 * s.oc * ohw;
    // With one sample per chunk the product is already in NCHW order: write it in place.
    float* out = samples == 1 ? y0 : product;
    gemm(false, false, s.oc, ld, k, 1.0f, weight, k, cols, ld, 0.0f, out, ld);
    for (int64_t n = 0; n < samples; ++n) {
      for (int64_t o = 0; o < s.oc; ++o) {
        const float* src = out + o * ld + n * ohw;
        float* dst = y0 + (n * s.oc + o) * ohw;
        const float b = bias ? bias[o] : 0.0f;
        if (src == dst) {
          if (bias)
            for (int64_t p = 0; p < ohw; ++p) dst[p] += b;
        } else {
          for (int64_t p = 0; p < ohw; ++p) dst[p] = src[p] + b;
        }
      }
    }
  }
}

void im2col_conv2d_backward(const float* x, const float* weight, const float* dy, const ConvShape& s, float* dx,
                            float* dweight, float* dbias, float* workspace) {
  const int64_t chunk = chunk_samples(s), ohw = s.oh * s.ow, k = s.c * s.kh * s.kw;
  const int64_t in_sample = s.c * s.h * s.w;
  float* cols = workspace;
  float* grad = workspace + chunk * ohw * k;
  if (dbias) {
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t o = 0; o < s.oc; ++o) {
        const float* plane = dy + (n * s.oc + o) * ohw;
        float sum = 0.0f;
        for (int64_t p = 0; p < ohw; ++p) sum += plane[p];
        dbias[o] += sum;
      }
    }
  }
  if (!dweight && !dx) return;
  for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
    const int64_t samples = std::min(chunk, s.n - n0), ld = samples * ohw;
    const float* dy0 = dy + n0 * s.oc * ohw;
    // dy of the chunk as [OC, samples*OH*OW], the layout of the forward product.
    const float* g = dy0;
    if (samples > 1) {
      for (int64_t n = 0; n < samples; ++n)
        for (int64_t o = 0; o < s.oc; ++o)
          std::memcpy(grad + o * ld + n * ohw, dy0 + (n * s.oc + o) * ohw, static_cast<size_t>(ohw) * sizeof(float));
      g = grad;
    }
    if (dweight) {
      im2col(x + n0 * in_sample, samples, s, cols);
      gemm(false, true, s.oc, k, ld, 1.0f, g, ld, cols, ld, 1.0f, dweight, k);  // dW += dy cols^T
    }
    if (dx) {
      gemm(true, false, k, ld, s.oc, 1.0f, weight, k, g, ld, 0.0f, cols, ld);  // dcols = W^T dy
      float* dx0 = dx + n0 * in_sample;
      std::fill(dx0, dx0 + samples * in_sample, 0.0f);
      col2im(cols, samples, s, dx0);
    }
  }
}

namespace {

// MIRRORED_CPU_CONV, read once: "auto" (or unset), "im2col" or "onednn".
enum class ConvOverride { kAuto, kIm2col, kOneDnn };
ConvOverride conv_override() {
  static const ConvOverride value = [] {
    const char* env = std::getenv("MIRRORED_CPU_CONV");
    const std::string_view name = env ? env : "auto";
    if (name == "auto" || name.empty()) return ConvOverride::kAuto;
    if (name == "im2col") return ConvOverride::kIm2col;
    if (name != "onednn")
      throw InputError(str_cat("MIRRORED_CPU_CONV=", name, ": expected auto, im2col or onednn"));
    require_onednn_build("MIRRORED_CPU_CONV");
    return ConvOverride::kOneDnn;
  }();
  return value;
}

}  // namespace

void read_conv_setting() { conv_override(); }

void require_onednn_build(std::string_view variable) {
  if (!onednn_built())
    throw InputError(str_cat(variable, "=onednn, but this build has no oneDNN (built with MIRRORED_ONEDNN=OFF, or not found)"));
}

#ifndef MIRRORED_WITH_ONEDNN
bool onednn_built() { return false; }
std::string onednn_version() { return ""; }
void onednn_conv2d_forward(const float*, const float*, const float*, const ConvShape&, float*, Precision) {
  MIRRORED_CHECK(false, "oneDNN convolution called in a build without oneDNN");
}
void onednn_conv2d_backward(const float*, const float*, const float*, const ConvShape&, float*, float*, float*,
                            Precision) {
  MIRRORED_CHECK(false, "oneDNN convolution called in a build without oneDNN");
}
#endif

ConvBackend conv_backend(const ConvShape& s, ConvPass pass) {
  // Nothing to compute (an empty batch): im2col's loops handle it without a primitive.
  if (s.n == 0 || s.oh * s.ow == 0) return ConvBackend::kIm2col;
  // oneDNN splits its work by the thread count; im2col's products are tiled (blas.cpp).
  if (thread_invariant()) return ConvBackend::kIm2col;
  switch (conv_override()) {
    case ConvOverride::kIm2col: return ConvBackend::kIm2col;
    case ConvOverride::kOneDnn: return ConvBackend::kOneDnn;
    case ConvOverride::kAuto: break;
  }
  if (!onednn_built()) return ConvBackend::kIm2col;
  // oneDNN's blocked layouts pad channels to 16: with a few input channels (a first layer
  // on grey or RGB images) its backward-data pass works mostly on padding, 6-12x slower
  // than im2col on the cnn's first layer (C=1). Its forward and weight gradient still win there.
  if (pass == ConvPass::kBackwardData && s.c < 4) return ConvBackend::kIm2col;
  return ConvBackend::kOneDnn;
}

namespace {

// bf16 through oneDNN's own bf16 primitives, or through rounded copies (bf16_backends.h).
bool onednn_bf16(ConvBackend backend) {
  return backend == ConvBackend::kOneDnn && bf16_gemm_backend() == Bf16Gemm::kOneDnn;
}

// x rounded to bfloat16 into grown scratch buffer `which` (main thread only, as the caches).
const float* rounded_copy(int which, const float* x, int64_t n) {
  static std::vector<float> buffers[3];
  std::vector<float>& buffer = buffers[which];
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  round_to_bf16(x, buffer.data(), n);
  return buffer.data();
}

}  // namespace

void conv2d_forward_with(ConvBackend backend, const float* x, const float* weight, const float* bias,
                         const ConvShape& s, float* y, float* workspace, Precision precision) {
  if (precision == Precision::kBF16 && !onednn_bf16(backend)) {
    conv2d_forward_with(backend, rounded_copy(0, x, s.n * s.c * s.h * s.w),
                        rounded_copy(1, weight, s.oc * s.c * s.kh * s.kw), bias, s, y, workspace);
    return;
  }
  if (backend == ConvBackend::kOneDnn)
    onednn_conv2d_forward(x, weight, bias, s, y, precision);
  else
    im2col_conv2d_forward(x, weight, bias, s, y, workspace);
}

void conv2d_backward_with(ConvBackend data_backend, ConvBackend weights_backend, const float* x,
                          const float* weight, const float* dy, const ConvShape& s, float* dx, float* dweight,
                          float* dbias, float* workspace, Precision precision) {
  if (data_backend != weights_backend) {
    // Mixed: each backend does its own half, the weight gradient first.
    conv2d_backward_with(weights_backend, weights_backend, x, weight, dy, s, nullptr, dweight, dbias, workspace,
                         precision);
    conv2d_backward_with(data_backend, data_backend, x, weight, dy, s, dx, nullptr, nullptr, workspace, precision);
    return;
  }
  const ConvBackend backend = data_backend;
  if (precision == Precision::kBF16 && !onednn_bf16(backend)) {
    // dbias sums the rounded dy, as oneDNN's bf16 primitive does with its bfloat16 diff_dst.
    const float* rx = dweight ? rounded_copy(0, x, s.n * s.c * s.h * s.w) : x;
    const float* rw = dx ? rounded_copy(1, weight, s.oc * s.c * s.kh * s.kw) : weight;
    const float* rdy = rounded_copy(2, dy, s.n * s.oc * s.oh * s.ow);
    conv2d_backward_with(backend, backend, rx, rw, rdy, s, dx, dweight, dbias, workspace);
    return;
  }
  if (backend == ConvBackend::kOneDnn)
    onednn_conv2d_backward(x, weight, dy, s, dx, dweight, dbias, precision);
  else
    im2col_conv2d_backward(x, weight, dy, s, dx, dweight, dbias, workspace);
}

void conv2d_forward(const float* x, const float* weight, const float* bias, const ConvShape& s, float* y,
                    float* workspace, Precision precision) {
  conv2d_forward_with(conv_backend(s, ConvPass::kForward), x, weight, bias, s, y, workspace, precision);
}

void conv2d_backward(const float* x, const float* weight, const float* dy, const ConvShape& s, float* dx,
                     float* dweight, float* dbias, float* workspace, Precision precision) {
  conv2d_backward_with(conv_backend(s, ConvPass::kBackwardData), conv_backend(s, ConvPass::kBackwardWeights), x,
                       weight, dy, s, dx, dweight, dbias, workspace, precision);
}

}  // namespace mirrored::kernels::cpu
