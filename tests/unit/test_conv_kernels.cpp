// Convolution and pooling kernels against direct loops over the definitions (double
// accumulation), on shapes that exercise padding, stride, non-square planes and the
// chunked im2col path (several chunks, and a last chunk of one sample).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

using testing::random_tensor;
using testing::relative_error;

struct ConvCase {
  int64_t n, c, h, w, oc, k, stride, pad;
};

// y[n, o, oy, ox] = b[o] + sum_{c,i,j} w[o, c, i, j] x[n, c, oy*s - p + i, ox*s - p + j]
std::vector<float> naive_conv(const Tensor& x, const Tensor& wt, const Tensor& b, const ConvCase& k, int64_t oh,
                              int64_t ow) {
  std::vector<float> y(static_cast<size_t>(k.n * k.oc * oh * ow));
  const float* xp = x.data<float>();
  const float* wp = wt.data<float>();
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.oc; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = b.data<float>()[o];
          for (int64_t c = 0; c < k.c; ++c)
            for (int64_t i = 0; i < k.k; ++i)
              for (int64_t j = 0; j < k.k; ++j) {
                const int64_t iy = oy * k.stride - k.pad + i, ix = ox * k.stride - k.pad + j;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                sum += static_cast<double>(wp[((o * k.c + c) * k.k + i) * k.k + j]) *
                       xp[((n * k.c + c) * k.h + iy) * k.w + ix];
              }
          y[static_cast<size_t>(((n * k.oc + o) * oh + oy) * ow + ox)] = static_cast<float>(sum);
        }
  return y;
}

class ConvKernel : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvKernel, ForwardAndBackwardMatchTheDefinition) {
  const ConvCase k = GetParam();
  Rng rng(5);
  const Tensor x = random_tensor({k.n, k.c, k.h, k.w}, rng);
  const Tensor wt = random_tensor({k.oc, k.c, k.k, k.k}, rng);
  const Tensor b = random_tensor({k.oc}, rng);
  const kernels::Conv2dParams params{k.k, k.k, k.stride, k.pad};
  const int64_t oh = kernels::conv_output_size(k.h, k.k, k.stride, k.pad);
  const int64_t ow = kernels::conv_output_size(k.w, k.k, k.stride, k.pad);
  Tensor y({k.n, k.oc, oh, ow}), workspace;
  kernels::conv2d_forward(x, wt, &b, params, y, workspace);
  EXPECT_LT(relative_error(y.to_vector(), naive_conv(x, wt, b, k, oh, ow)), 1e-5);

  // Backward against the adjoint of the (linear) forward: with L = sum(y * dy),
  // dL/dw[o,c,i,j] and dL/dx are sums over the same index pairs as the forward.
  const Tensor dy = random_tensor(y.shape(), rng);
  Tensor dx(x.shape()), dw(wt.shape()), db({k.oc});
  kernels::conv2d_backward(x, wt, dy, params, &dx, dw, &db, workspace);
  std::vector<double> rdx(static_cast<size_t>(x.numel())), rdw(static_cast<size_t>(wt.numel())),
      rdb(static_cast<size_t>(k.oc));
  const float* xp = x.data<float>();
  const float* wp = wt.data<float>();
  const float* gp = dy.data<float>();
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.oc; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const double g = gp[((n * k.oc + o) * oh + oy) * ow + ox];
          rdb[static_cast<size_t>(o)] += g;
          for (int64_t c = 0; c < k.c; ++c)
            for (int64_t i = 0; i < k.k; ++i)
              for (int64_t j = 0; j < k.k; ++j) {
                const int64_t iy = oy * k.stride - k.pad + i, ix = ox * k.stride - k.pad + j;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                const size_t wi = static_cast<size_t>(((o * k.c + c) * k.k + i) * k.k + j);
                const size_t xi = static_cast<size_t>(((n * k.c + c) * k.h + iy) * k.w + ix);
                rdw[wi] += g * xp[xi];
                rdx[xi] += g * wp[wi];
              }
        }
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  EXPECT_LT(relative_error(dx.to_vector(), as_float(rdx)), 1e-5);
  EXPECT_LT(relative_error(dw.to_vector(), as_float(rdw)), 1e-5);
  EXPECT_LT(relative_error(db.to_vector(), as_float(rdb)), 1e-5);

  // Parameter gradients accumulate; the input gradient is overwritten.
  kernels::conv2d_backward(x, wt, dy, params, &dx, dw, &db, workspace);
  for (auto& v : rdw) v *= 2;
  EXPECT_LT(relative_error(dw.to_vector(), as_float(rdw)), 1e-5);
  EXPECT_LT(relative_error(dx.to_vector(), as_float(rdx)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvKernel,
                         ::testing::Values(ConvCase{2, 3, 7, 6, 4, 3, 1, 1},   // padding, non-square
                                           ConvCase{2, 3, 9, 8, 5, 3, 2, 1},   // stride 2
                                           ConvCase{3, 2, 6, 6, 3, 1, 2, 0},   // 1x1 shortcut
                                           ConvCase{1, 1, 5, 5, 2, 5, 1, 2},   // kernel = input
                                           // ~115k floats of patches per sample: chunks of 2, 2, 1
                                           ConvCase{5, 8, 28, 28, 6, 5, 1, 0}));

TEST(ConvKernel, RejectsAKernelThatDoesNotFit) {
  Tensor x({1, 1, 3, 3}), w({1, 1, 5, 5}), y({1, 1, 1, 1}), ws;
  EXPECT_THROW(kernels::conv2d_forward(x, w, nullptr, {5, 5, 1, 0}, y, ws), Error);
}

TEST(PoolKernel, MaxPoolPicksTheMaximumAndRoutesTheGradient) {
  // One 4x4 plane, 2x2 windows: maxima 5, 7, 13, 15 (two equal 7s: the first wins).
  const Tensor x = Tensor::from({0, 5, 1, 7,  //
                                 2, 3, 7, 4,  //
                                 8, 13, 9, 15,  //
                                 12, 10, 14, 11},
                                {1, 1, 4, 4});
  Tensor y({1, 1, 2, 2}), arg({1, 1, 2, 2}, DType::kI32);
  kernels::max_pool2d_forward(x, {2, 2, 2, 0}, y, arg);
  EXPECT_EQ(y.to_vector(), std::vector<float>({5, 7, 13, 15}));
  EXPECT_EQ(arg.data<int32_t>()[1], 3);  // the first 7, at (0, 3)
  Tensor dx({1, 1, 4, 4});
  kernels::max_pool2d_backward(Tensor::from({1, 2, 3, 4}, {1, 1, 2, 2}), arg, {2, 2, 2, 0}, dx);
  EXPECT_EQ(dx.to_vector(), std::vector<float>({0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0}));
}

TEST(PoolKernel, TwoByTwoPoolingMatchesTheDefinitionWithTiesAndNaNs) {
  // The CPU's vectorised 2x2 path: rows of 10 outputs (whole vectors and a remainder), an
  // odd height and width (a last row and column no window reads), values with ties in
  // most windows and NaNs at every position of a window. The definition: scan the window
  // row by row, the first element first, and move only to a strictly greater value.
  const int64_t planes = 6, h = 7, w = 21, oh = 3, ow = 10;
  Rng rng(11);
  std::vector<float> xs(static_cast<size_t>(planes * h * w));
  for (float& v : xs) v = static_cast<float>(rng.below(3));
  for (size_t i = 0; i < xs.size(); i += 13) xs[i] = std::nanf("");
  const Tensor x = Tensor::from(xs, {1, planes, h, w});
  Tensor y({1, planes, oh, ow}), arg({1, planes, oh, ow}, DType::kI32);
  kernels::max_pool2d_forward(x, {2, 2, 2, 0}, y, arg);
  const Tensor dy = random_tensor({1, planes, oh, ow}, rng);
  Tensor dx = Tensor::from(std::vector<float>(xs.size(), 9.0f), {1, planes, h, w});  // overwritten
  kernels::max_pool2d_backward(dy, arg, {2, 2, 2, 0}, dx);
  std::vector<float> expected_dx(xs.size(), 0.0f);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t best = 2 * oy * w + 2 * ox;
        for (int64_t at : {best + 1, best + w, best + w + 1})
          if (xs[static_cast<size_t>(p * h * w + at)] > xs[static_cast<size_t>(p * h * w + best)]) best = at;
        const int64_t o = (p * oh + oy) * ow + ox;
        const float want = xs[static_cast<size_t>(p * h * w + best)], got = y.data<float>()[o];
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << "output " << o;
        EXPECT_EQ(arg.data<int32_t>()[o], best) << "output " << o;
        expected_dx[static_cast<size_t>(p * h * w + best)] = dy.data<float>()[o];
      }
  EXPECT_EQ(dx.to_vector(), expected_dx);
}

TEST(PoolKernel, PaddingNeverWinsAMaxAndCountsInAnAverage) {
  // All-negative input with padding 1: a padded zero would win a max if it took part.
  const Tensor x = Tensor::from({-1, -2, -3, -4}, {1, 1, 2, 2});
  Tensor y({1, 1, 2, 2}), arg({1, 1, 2, 2}, DType::kI32);
  // 2x2 windows, stride 2, padding 1: each window holds one real element and three pads.
  kernels::max_pool2d_forward(x, {2, 2, 2, 1}, y, arg);
  EXPECT_EQ(y.to_vector(), std::vector<float>({-1, -2, -3, -4}));
  Tensor avg({1, 1, 2, 2});
  kernels::avg_pool2d_forward(x, {2, 2, 2, 1}, avg);
  // count_include_pad: every window divides by 4.
  EXPECT_EQ(avg.to_vector(), std::vector<float>({-0.25f, -0.5f, -0.75f, -1.0f}));
}

TEST(BatchNormKernel, StatisticsMatchTheDefinition) {
  Rng rng(3);
  // Mean far from zero: the shifted sums must not lose the variance.
  const Tensor x = random_tensor({4, 3, 5, 2}, rng, 99.0f, 101.0f);
  Tensor shift = Tensor::from({100.0f, 100.0f, 100.0f}, {3});
  Tensor sums({7}), mean({3}), invstd({3}), rm({3}), rv = Tensor::from({1, 1, 1}, {3});
  kernels::batch_norm_sums(x, shift, sums);
  kernels::batch_norm_statistics(sums, shift, 1e-5f, 0.1f, mean, invstd, rm, rv);
  for (int64_t c = 0; c < 3; ++c) {
    double s = 0, ss = 0;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t p = 0; p < 10; ++p) s += x.data<float>()[(n * 3 + c) * 10 + p];
    const double m = s / 40;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t p = 0; p < 10; ++p) ss += std::pow(x.data<float>()[(n * 3 + c) * 10 + p] - m, 2);
    const double var = ss / 40;
    EXPECT_NEAR(mean.data<float>()[c], m, 1e-4);
    EXPECT_NEAR(invstd.data<float>()[c], 1 / std::sqrt(var + 1e-5), 1e-3 / std::sqrt(var));
    EXPECT_NEAR(rm.data<float>()[c], 0.1 * m, 1e-5);
    EXPECT_NEAR(rv.data<float>()[c], 0.9 + 0.1 * ss / 39, 1e-5);  // unbiased, as PyTorch
  }
  EXPECT_EQ(sums.data<float>()[6], 40.0f);
}

TEST(DropoutKernel, MasksDependOnTheGlobalSampleNotTheSplit) {
  Rng rng(4);
  const Tensor x = random_tensor({6, 50}, rng);
  Tensor whole_mask({6, 50}), whole({6, 50});
  kernels::dropout_forward(x, 0.3f, 99, 0, whole_mask, whole);
  // The same 6 samples as replicas 0..2 of 2 samples each.
  for (int64_t r = 0; r < 3; ++r) {
    Tensor part_mask({2, 50}), part({2, 50});
    kernels::dropout_forward(x.view(r * 100, {2, 50}), 0.3f, 99, r * 2, part_mask, part);
    EXPECT_EQ(part.to_vector(), whole.view(r * 100, {2, 50}).to_vector()) << "replica " << r;
  }
  int64_t dropped = 0;
  for (float m : whole_mask.to_vector()) {
    EXPECT_TRUE(m == 0.0f || std::abs(m - 1.0f / 0.7f) < 1e-6f);
    dropped += m == 0.0f;
  }
  // 300 Bernoulli(0.3) draws: mean 90, sd ~7.9; 60..120 is beyond 3.5 sd.
  EXPECT_GT(dropped, 60);
  EXPECT_LT(dropped, 120);
  Tensor other_mask({6, 50}), other({6, 50});
  kernels::dropout_forward(x, 0.3f, 100, 0, other_mask, other);
  EXPECT_NE(other_mask.to_vector(), whole_mask.to_vector());
}

}  // namespace
}  // namespace mirrored
