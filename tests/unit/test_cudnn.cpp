// The cuDNN wrappers (src/kernels/cuda/cudnn_*.cpp), called directly, against naive loops
// written here: convolution forward/backward with bias, padding and stride, algorithm
// planning once per shape, pooling, batch norm and activations. CUDA build with a GPU only.
#include <gtest/gtest.h>

#include "devices.h"

#ifdef MIRRORED_WITH_CUDA
#include <cmath>
#include <vector>

#include "../../src/kernels/cuda/cudnn_ops.h"
#include "gradcheck.h"

namespace mirrored {
namespace {

using kernels::cuda::dnn::Conv2dShape;
using testing::relative_error;

constexpr double kTol = 1e-5;

class Cudnn : public testing::CudaTest {
 protected:
  static Tensor gpu(const Tensor& t) { return testing::to_device(t, Device::cuda(0)); }
  static float* ptr(Tensor& t) { return t.data<float>(); }
  static const float* cptr(const Tensor& t) { return t.data<float>(); }
  static void sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }
};

// NCHW cross-correlation with zero padding, in double.
std::vector<float> naive_conv(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& bias, int64_t oh, int64_t ow) {
  std::vector<float> y(static_cast<size_t>(s.n * s.k * oh * ow));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = bias.empty() ? 0.0 : bias[static_cast<size_t>(k)];
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t r = 0; r < s.r; ++r)
              for (int64_t q = 0; q < s.s; ++q) {
                const int64_t hi = i * s.stride_h - s.pad_h + r, wi = j * s.stride_w - s.pad_w + q;
                if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;
                sum += static_cast<double>(x[static_cast<size_t>(((n * s.c + c) * s.h + hi) * s.w + wi)]) *
                       w[static_cast<size_t>(((k * s.c + c) * s.r + r) * s.s + q)];
              }
          y[static_cast<size_t>(((n * s.k + k) * oh + i) * ow + j)] = static_cast<float>(sum);
        }
  return y;
}

TEST_F(Cudnn, ConvolutionForwardBackwardAgainstNaiveLoops) {
  const Conv2dShape s{2, 3, 7, 6, 4, 3, 3, 1, 1, 2, 1};  // pad 1, stride 2x1: uneven on purpose
  for (auto search : {kernels::cuda::dnn::AlgoSearch::kHeuristic, kernels::cuda::dnn::AlgoSearch::kBenchmark}) {
    const auto& plan = kernels::cuda::dnn::conv_plan(0, s, search);
    const int64_t oh = plan.out_h(), ow = plan.out_w();
    ASSERT_EQ(oh, (7 + 2 - 3) / 2 + 1);
    ASSERT_EQ(ow, (6 + 2 - 3) / 1 + 1);
    Rng rng(31);
    const Tensor x = testing::random_tensor({s.n, s.c, s.h, s.w}, rng);
    const Tensor w = testing::random_tensor({s.k, s.c, s.r, s.s}, rng);
    const Tensor b = testing::random_tensor({s.k}, rng);
    const Tensor dy = testing::random_tensor({s.n, s.k, oh, ow}, rng);
    Tensor gx = gpu(x), gw = gpu(w), gb = gpu(b), gdy = gpu(dy);
    Tensor y({s.n, s.k, oh, ow}, DType::kF32, Device::cuda(0));
    plan.forward(cptr(gx), cptr(gw), cptr(gb), ptr(y));
    EXPECT_LT(relative_error(y.to_vector(), naive_conv(s, x.to_vector(), w.to_vector(), b.to_vector(), oh, ow)), kTol);

    // Gradients of L = sum(y * dy) by linearity: dL/dx[e] = L(x = onehot e), etc. Done
    // with the naive forward, so the reference shares no code with cuDNN.
    const auto xv = x.to_vector(), wv = w.to_vector(), dyv = dy.to_vector();
    auto dot = [&](const std::vector<float>& a) {
      double sum = 0.0;
      for (size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * dyv[i];
      return static_cast<float>(sum);
    };
    std::vector<float> expect_dx(xv.size()), expect_dw(wv.size()), expect_db(static_cast<size_t>(s.k));
    for (size_t e = 0; e < xv.size(); ++e) {
      std::vector<float> onehot(xv.size(), 0.0f);
      onehot[e] = 1.0f;
      expect_dx[e] = dot(naive_conv(s, onehot, wv, {}, oh, ow));
    }
    for (size_t e = 0; e < wv.size(); ++e) {
      std::vector<float> onehot(wv.size(), 0.0f);
      onehot[e] = 1.0f;
      expect_dw[e] = 2.0f * dot(naive_conv(s, xv, onehot, {}, oh, ow));  // accumulated twice below
    }
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t p = 0; p < oh * ow; ++p) expect_db[static_cast<size_t>(k)] += 2.0f * dyv[static_cast<size_t>((n * s.k + k) * oh * ow + p)];
    Tensor dx({s.n, s.c, s.h, s.w}, DType::kF32, Device::cuda(0));
    Tensor dw({s.k, s.c, s.r, s.s}, DType::kF32, Device::cuda(0)), db({s.k}, DType::kF32, Device::cuda(0));
    plan.backward_data(cptr(gw), cptr(gdy), ptr(dx));
    plan.backward_filter(cptr(gx), cptr(gdy), ptr(dw), ptr(db));
    plan.backward_filter(cptr(gx), cptr(gdy), ptr(dw), ptr(db));  // parameter gradients accumulate
    EXPECT_LT(relative_error(dx.to_vector(), expect_dx), kTol);
    EXPECT_LT(relative_error(dw.to_vector(), expect_dw), kTol);
    EXPECT_LT(relative_error(db.to_vector(), expect_db), kTol);
  }
}

TEST_F(Cudnn, AlgorithmsAreChosenOncePerShape) {
  const Conv2dShape a{4, 1, 28, 28, 8, 5, 5, 2, 2, 1, 1}, b{4, 8, 14, 14, 16, 5, 5, 2, 2, 1, 1};
  const size_t before = kernels::cuda::dnn::conv_plans_created(0);
  const auto* first = &kernels::cuda::dnn::conv_plan(0, a);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(&kernels::cuda::dnn::conv_plan(0, a), first);
  kernels::cuda::dnn::conv_plan(0, b);
  EXPECT_EQ(kernels::cuda::dnn::conv_plans_created(0), before + 2);
  // The shared workspace covers the largest plan, so later calls never allocate.
  EXPECT_GE(kernels::cuda::context(0).workspace_bytes(), first->workspace_bytes());
}

TEST_F(Cudnn, MaxAndAveragePoolingForwardAndBackward) {
  Rng rng(41);
  const Tensor x = testing::random_tensor({2, 3, 6, 6}, rng);
  const auto xv = x.to_vector();
  for (auto mode : {kernels::cuda::dnn::PoolMode::kMax, kernels::cuda::dnn::PoolMode::kAverage}) {
    kernels::cuda::dnn::Pool2d pool(0, mode, 2, 3, 6, 6, 2, 2, 0);
    ASSERT_EQ(pool.out_h(), 3);
    Tensor gx = gpu(x), y({2, 3, 3, 3}, DType::kF32, Device::cuda(0));
    pool.forward(cptr(gx), ptr(y));
    const Tensor dy = testing::random_tensor({2, 3, 3, 3}, rng);
    const auto dyv = dy.to_vector();
    Tensor gdy = gpu(dy), dx({2, 3, 6, 6}, DType::kF32, Device::cuda(0));
    pool.backward(cptr(gx), cptr(y), cptr(gdy), ptr(dx));
    std::vector<float> expect_y(54), expect_dx(xv.size(), 0.0f);
    for (int64_t plane = 0; plane < 6; ++plane)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          const size_t out = static_cast<size_t>((plane * 3 + i) * 3 + j);
          size_t arg = 0;
          double best = -1e30, sum = 0.0;
          for (int64_t r = 0; r < 2; ++r)
            for (int64_t q = 0; q < 2; ++q) {
              const size_t in = static_cast<size_t>((plane * 6 + 2 * i + r) * 6 + 2 * j + q);
              sum += xv[in];
              if (xv[in] > best) {
                best = xv[in];
                arg = in;
              }
            }
          if (mode == kernels::cuda::dnn::PoolMode::kMax) {
            expect_y[out] = static_cast<float>(best);
            expect_dx[arg] += dyv[out];
          } else {
            expect_y[out] = static_cast<float>(sum / 4.0);
            for (int64_t r = 0; r < 2; ++r)
              for (int64_t q = 0; q < 2; ++q)
                expect_dx[static_cast<size_t>((plane * 6 + 2 * i + r) * 6 + 2 * j + q)] += dyv[out] / 4.0f;
          }
        }
    EXPECT_LT(relative_error(y.to_vector(), expect_y), kTol);
    EXPECT_LT(relative_error(dx.to_vector(), expect_dx), kTol);
  }
}

TEST_F(Cudnn, BatchNormTrainingInferenceAndBackward) {
  const int64_t n = 4, c = 3, hw = 5;
  Rng rng(51);
  const Tensor x = testing::random_tensor({n, c, hw, hw}, rng, -2.0f, 3.0f);
  const Tensor scale = testing::random_tensor({c}, rng, 0.5f, 1.5f), bias = testing::random_tensor({c}, rng);
  const Tensor dy = testing::random_tensor({n, c, hw, hw}, rng);
  const double eps = 1e-5, momentum = 0.1;
  kernels::cuda::dnn::BatchNorm2d bn(0, n, c, hw, hw, eps, momentum);
  Tensor gx = gpu(x), gscale = gpu(scale), gbias = gpu(bias), gdy = gpu(dy);
  Tensor y({n, c, hw, hw}, DType::kF32, Device::cuda(0)), mean({c}, DType::kF32, Device::cuda(0));
  Tensor var = gpu(Tensor::from(std::vector<float>(static_cast<size_t>(c), 1.0f), {c}));
  Tensor save_mean({c}, DType::kF32, Device::cuda(0)), save_inv({c}, DType::kF32, Device::cuda(0));
  bn.forward_training(cptr(gx), cptr(gscale), cptr(gbias), ptr(y), ptr(mean), ptr(var), ptr(save_mean), ptr(save_inv));
  Tensor dx({n, c, hw, hw}, DType::kF32, Device::cuda(0)), dscale({c}, DType::kF32, Device::cuda(0)),
      dbias({c}, DType::kF32, Device::cuda(0));
  bn.backward(cptr(gx), cptr(gdy), cptr(gscale), cptr(save_mean), cptr(save_inv), ptr(dx), ptr(dscale), ptr(dbias));

  const auto xv = x.to_vector(), dyv = dy.to_vector(), sv = scale.to_vector(), bv = bias.to_vector();
  const int64_t m = n * hw * hw;
  std::vector<float> expect_y(xv.size()), expect_dx(xv.size()), expect_mean(3), expect_var(3), expect_ds(3), expect_db(3);
  auto at = [&](int64_t i, int64_t ch, int64_t p) { return static_cast<size_t>((i * c + ch) * hw * hw + p); };
  for (int64_t ch = 0; ch < c; ++ch) {
    double mu = 0.0, var_b = 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < hw * hw; ++p) mu += xv[at(i, ch, p)];
    mu /= static_cast<double>(m);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < hw * hw; ++p) var_b += std::pow(xv[at(i, ch, p)] - mu, 2);
    var_b /= static_cast<double>(m);
    const double inv = 1.0 / std::sqrt(var_b + eps);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < hw * hw; ++p) {
        const double xhat = (xv[at(i, ch, p)] - mu) * inv;
        expect_y[at(i, ch, p)] = static_cast<float>(sv[static_cast<size_t>(ch)] * xhat + bv[static_cast<size_t>(ch)]);
        sum_dy += dyv[at(i, ch, p)];
        sum_dy_xhat += dyv[at(i, ch, p)] * xhat;
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < hw * hw; ++p) {
        const double xhat = (xv[at(i, ch, p)] - mu) * inv;
        expect_dx[at(i, ch, p)] = static_cast<float>(sv[static_cast<size_t>(ch)] * inv / static_cast<double>(m) *
                                                     (static_cast<double>(m) * dyv[at(i, ch, p)] - sum_dy - xhat * sum_dy_xhat));
      }
    const auto k = static_cast<size_t>(ch);
    expect_mean[k] = static_cast<float>(momentum * mu);  // running mean started at 0
    expect_var[k] = static_cast<float>((1 - momentum) * 1.0 + momentum * var_b * m / (m - 1));  // unbiased
    expect_ds[k] = static_cast<float>(sum_dy_xhat);
    expect_db[k] = static_cast<float>(sum_dy);
  }
  EXPECT_LT(relative_error(y.to_vector(), expect_y), 1e-4);
  EXPECT_LT(relative_error(mean.to_vector(), expect_mean), 1e-5);
  EXPECT_LT(relative_error(var.to_vector(), expect_var), 1e-5);
  EXPECT_LT(relative_error(dx.to_vector(), expect_dx), 1e-4);
  EXPECT_LT(relative_error(dscale.to_vector(), expect_ds), 1e-4);
  EXPECT_LT(relative_error(dbias.to_vector(), expect_db), 1e-4);

  // Inference uses the running statistics given.
  Tensor y_inf({n, c, hw, hw}, DType::kF32, Device::cuda(0));
  bn.forward_inference(cptr(gx), cptr(gscale), cptr(gbias), cptr(mean), cptr(var), ptr(y_inf));
  const auto mv = mean.to_vector(), vv = var.to_vector();
  std::vector<float> expect_inf(xv.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw * hw; ++p) {
        const auto k = static_cast<size_t>(ch);
        expect_inf[at(i, ch, p)] =
            static_cast<float>(sv[k] * (xv[at(i, ch, p)] - mv[k]) / std::sqrt(vv[k] + eps) + bv[k]);
      }
  EXPECT_LT(relative_error(y_inf.to_vector(), expect_inf), 1e-5);
}

TEST_F(Cudnn, ActivationsForwardAndBackward) {
  Rng rng(61);
  const Tensor x = testing::random_tensor({2, 3, 4, 5}, rng, -3.0f, 3.0f), dy = testing::random_tensor({2, 3, 4, 5}, rng);
  const auto xv = x.to_vector(), dyv = dy.to_vector();
  using kernels::cuda::dnn::ActivationMode;
  for (auto mode : {ActivationMode::kRelu, ActivationMode::kSigmoid, ActivationMode::kTanh}) {
    kernels::cuda::dnn::Activation act(0, mode, 2, 3, 4, 5);
    Tensor gx = gpu(x), gdy = gpu(dy), y({2, 3, 4, 5}, DType::kF32, Device::cuda(0)),
           dx({2, 3, 4, 5}, DType::kF32, Device::cuda(0));
    act.forward(cptr(gx), ptr(y));
    act.backward(cptr(gx), cptr(y), cptr(gdy), ptr(dx));
    std::vector<float> expect_y(xv.size()), expect_dx(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      const double v = xv[i];
      const double out = mode == ActivationMode::kRelu ? std::max(v, 0.0)
                         : mode == ActivationMode::kSigmoid ? 1.0 / (1.0 + std::exp(-v))
                                                            : std::tanh(v);
      const double slope = mode == ActivationMode::kRelu ? (v > 0 ? 1.0 : 0.0)
                           : mode == ActivationMode::kSigmoid ? out * (1 - out)
                                                              : 1 - out * out;
      expect_y[i] = static_cast<float>(out);
      expect_dx[i] = static_cast<float>(slope * dyv[i]);
    }
    EXPECT_LT(relative_error(y.to_vector(), expect_y), kTol) << static_cast<int>(mode);
    EXPECT_LT(relative_error(dx.to_vector(), expect_dx), kTol) << static_cast<int>(mode);
  }
}

}  // namespace
}  // namespace mirrored

#else
TEST(Cudnn, WrappersNeedTheCudaBuild) {
  GTEST_SKIP() << "no CUDA device: built without CUDA (configure with -DMIRRORED_CUDA=ON)";
}
#endif
