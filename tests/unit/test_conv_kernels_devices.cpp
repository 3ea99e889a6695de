// The convolution-family ops (convolution, pooling, batch norm, dropout, add) on every
// device present. First each op against a reference worked out here on small inputs, on
// the CPU and (when a GPU is usable) on CUDA; then CPU-vs-GPU agreement on larger random
// inputs: exact where the two implementations promise the same bits (pooling, dropout
// masks, add), within the relative-error helper's tolerance elsewhere. Without a GPU the
// CUDA instances are skipped with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "devices.h"
#include "gradcheck.h"
#include "mirrored/core/counter_rng.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

using testing::DeviceTest;
using testing::host_values;
using testing::random_tensor;
using testing::relative_error;

constexpr double kTight = 1e-5;

std::vector<int32_t> int_values(const Tensor& t) {
  Tensor host(t.shape(), DType::kI32);
  kernels::copy(t, host);
  return std::vector<int32_t>(host.data<int32_t>(), host.data<int32_t>() + host.numel());
}

// Small integers: many equal values, so tie-breaking is exercised.
Tensor integer_tensor(const Shape& shape, Rng& rng, uint64_t levels) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(rng.below(levels)) - 2.0f;
  return t;
}

// ---- every device against references worked out here -------------------------------------

class ConvFamilyOn : public DeviceTest {};

TEST_P(ConvFamilyOn, MaxPoolFirstMaximumWinsAndGradientFollowsIt) {
  // 2x2 windows: maxima 5, 7, 13, 15; the two 7s tie and the first (index 3) wins.
  const Tensor x = Tensor::from({0, 5, 1, 7, 2, 3, 7, 4, 8, 13, 9, 15, 12, 10, 14, 11}, {1, 1, 4, 4});
  Tensor y = on_device(Tensor({1, 1, 2, 2})), arg = on_device(Tensor({1, 1, 2, 2}, DType::kI32));
  kernels::max_pool2d_forward(on_device(x), {2, 2, 2, 0}, y, arg);
  EXPECT_EQ(host_values(y), std::vector<float>({5, 7, 13, 15}));
  EXPECT_EQ(int_values(arg), std::vector<int32_t>({1, 3, 9, 11}));
  Tensor dx = on_device(Tensor::from(std::vector<float>(16, 9.0f), {1, 1, 4, 4}));  // overwritten
  kernels::max_pool2d_backward(on_device(Tensor::from({1, 2, 3, 4}, {1, 1, 2, 2})), arg, {2, 2, 2, 0}, dx);
  EXPECT_EQ(host_values(dx), std::vector<float>({0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0}));
}

TEST_P(ConvFamilyOn, OverlappingMaxPoolWindowsAddTheirGradients) {
  // 3x3 windows, stride 1 over a 4x4 plane with its maximum (9) in the middle of all four
  // windows: its gradient is the sum of all four.
  const Tensor x = Tensor::from({0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 4, 4});
  const kernels::Pool2dParams params{3, 3, 1, 0};
  Tensor y = on_device(Tensor({1, 1, 2, 2})), arg = on_device(Tensor({1, 1, 2, 2}, DType::kI32));
  kernels::max_pool2d_forward(on_device(x), params, y, arg);
  EXPECT_EQ(int_values(arg), std::vector<int32_t>({5, 5, 5, 5}));
  Tensor dx = on_device(Tensor({1, 1, 4, 4}));
  kernels::max_pool2d_backward(on_device(Tensor::from({1, 2, 3, 4}, {1, 1, 2, 2})), arg, params, dx);
  std::vector<float> expected(16, 0.0f);
  expected[5] = 10;
  EXPECT_EQ(host_values(dx), expected);
}

TEST_P(ConvFamilyOn, PaddingNeverWinsAMaxAndCountsInAnAverage) {
  const Tensor x = Tensor::from({-1, -2, -3, -4}, {1, 1, 2, 2});
  const kernels::Pool2dParams params{2, 2, 2, 1};  // each window: one element, three pads
  Tensor y = on_device(Tensor({1, 1, 2, 2})), arg = on_device(Tensor({1, 1, 2, 2}, DType::kI32));
  kernels::max_pool2d_forward(on_device(x), params, y, arg);
  EXPECT_EQ(host_values(y), std::vector<float>({-1, -2, -3, -4}));
  EXPECT_EQ(int_values(arg), std::vector<int32_t>({0, 1, 2, 3}));
  Tensor avg = on_device(Tensor({1, 1, 2, 2}));
  kernels::avg_pool2d_forward(on_device(x), params, avg);
  EXPECT_EQ(host_values(avg), std::vector<float>({-0.25f, -0.5f, -0.75f, -1.0f}));
  Tensor dx = on_device(Tensor::from({7, 7, 7, 7}, {1, 1, 2, 2}));  // overwritten
  kernels::avg_pool2d_backward(on_device(Tensor::from({4, 8, 12, 16}, {1, 1, 2, 2})), params, dx);
  EXPECT_EQ(host_values(dx), std::vector<float>({1, 2, 3, 4}));
}

TEST_P(ConvFamilyOn, AveragePoolGradientSpreadsOverOverlappingWindows) {
  // 2x2 windows, stride 1, over a 3x3 plane of ones: the centre is in all four windows.
  const Tensor x = Tensor::from(std::vector<float>(9, 1.0f), {1, 1, 3, 3});
  const kernels::Pool2dParams params{2, 2, 1, 0};
  Tensor y = on_device(Tensor({1, 1, 2, 2}));
  kernels::avg_pool2d_forward(on_device(x), params, y);
  EXPECT_EQ(host_values(y), std::vector<float>({1, 1, 1, 1}));
  Tensor dx = on_device(Tensor({1, 1, 3, 3}));
  kernels::avg_pool2d_backward(on_device(Tensor::from({4, 4, 4, 4}, {1, 1, 2, 2})), params, dx);
  EXPECT_EQ(host_values(dx), std::vector<float>({1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TEST_P(ConvFamilyOn, ConvolutionAccumulatesParameterGradientsAndOverwritesDx) {
  // (Within a tolerance: cuDNN may pick an algorithm, FFT or Winograd, that rounds even
  // small integers.) One 3x3 input, one 2x2 filter of ones, bias 0.5: each output is its window's sum + 0.5.
  const Tensor x = Tensor::from({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  const Tensor w = Tensor::from({1, 1, 1, 1}, {1, 1, 2, 2}), b = Tensor::from({0.5f}, {1});
  const kernels::Conv2dParams params{2, 2, 1, 0};
  Tensor y = on_device(Tensor({1, 1, 2, 2})), workspace;
  kernels::conv2d_forward(on_device(x), on_device(w), nullptr, params, y, workspace);
  EXPECT_LT(relative_error(host_values(y), {12, 16, 24, 28}), kTight);
  const Tensor bias = on_device(b);
  kernels::conv2d_forward(on_device(x), on_device(w), &bias, params, y, workspace);
  EXPECT_LT(relative_error(host_values(y), {12.5f, 16.5f, 24.5f, 28.5f}), kTight);
  // dy = 1 everywhere: dw[i, j] = sum of the window sums = sum over the 4 windows of
  // x[oy + i, ox + j]; db = 4; dx[p] = number of windows covering p.
  Tensor dw = on_device(Tensor::from({10, 10, 10, 10}, {1, 1, 2, 2})), db = on_device(Tensor::from({1}, {1}));
  Tensor dx = on_device(Tensor::from(std::vector<float>(9, -3.0f), {1, 1, 3, 3}));
  const Tensor dy = on_device(Tensor::from({1, 1, 1, 1}, {1, 1, 2, 2}));
  kernels::conv2d_backward(on_device(x), on_device(w), dy, params, &dx, dw, &db, workspace);
  EXPECT_LT(relative_error(host_values(dw), {10 + 12, 10 + 16, 10 + 24, 10 + 28}), kTight);
  EXPECT_LT(relative_error(host_values(db), {5}), kTight);
  EXPECT_LT(relative_error(host_values(dx), {1, 2, 1, 2, 4, 2, 1, 2, 1}), kTight);
  // Without dx and dbias: only dw moves.
  kernels::conv2d_backward(on_device(x), on_device(w), dy, params, nullptr, dw, nullptr, workspace);
  EXPECT_LT(relative_error(host_values(dw), {10 + 24, 10 + 32, 10 + 48, 10 + 56}), kTight);
  EXPECT_LT(relative_error(host_values(db), {5}), kTight);
}

TEST_P(ConvFamilyOn, BatchNormForwardAndBackwardMatchTheDefinition) {
  Rng rng(31);
  const int64_t n = 3, c = 2, plane = 5;
  const Tensor x = random_tensor({n, c, 1, plane}, rng, 49.0f, 51.0f);  // mean ~50
  const Tensor dy = random_tensor(x.shape(), rng);
  const Tensor gamma = Tensor::from({1.5f, -0.5f}, {2}), beta = Tensor::from({0.25f, 2.0f}, {2});
  Tensor shift = on_device(Tensor::from({50, 50}, {2})), sums = on_device(Tensor({2 * c + 1}));
  Tensor mean = on_device(Tensor({c})), invstd = on_device(Tensor({c}));
  Tensor rm = on_device(Tensor::from({1, 2}, {2})), rv = on_device(Tensor::from({3, 4}, {2}));
  const Tensor xd = on_device(x), dyd = on_device(dy);
  kernels::batch_norm_sums(xd, shift, sums);
  kernels::batch_norm_statistics(sums, shift, 1e-5f, 0.1f, mean, invstd, rm, rv);
  Tensor y = on_device(Tensor(x.shape()));
  kernels::batch_norm_apply(xd, mean, invstd, on_device(gamma), on_device(beta), y);
  Tensor grad_sums = on_device(Tensor({2 * c + 1})), dx = on_device(Tensor(x.shape()));
  kernels::batch_norm_backward_sums(xd, dyd, mean, invstd, grad_sums);
  kernels::batch_norm_backward_input(xd, dyd, mean, invstd, on_device(gamma), grad_sums, dx);

  const float* xp = x.data<float>();
  const float* gp = dy.data<float>();
  std::vector<float> ey(static_cast<size_t>(x.numel())), edx(ey.size()), emean(2), einv(2), erm(2), erv(2),
      egs(2 * c + 1);
  for (int64_t ch = 0; ch < c; ++ch) {
    auto at = [&](int64_t b, int64_t i) { return static_cast<size_t>((b * c + ch) * plane + i); };
    double s = 0, ss = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < plane; ++i) s += xp[at(b, i)];
    const double m = s / (n * plane);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < plane; ++i) ss += (xp[at(b, i)] - m) * (xp[at(b, i)] - m);
    const double var = ss / (n * plane), inv = 1 / std::sqrt(var + 1e-5);
    emean[static_cast<size_t>(ch)] = static_cast<float>(m);
    einv[static_cast<size_t>(ch)] = static_cast<float>(inv);
    erm[static_cast<size_t>(ch)] = static_cast<float>(0.9 * (ch + 1) + 0.1 * m);
    erv[static_cast<size_t>(ch)] = static_cast<float>(0.9 * (ch + 3) + 0.1 * ss / (n * plane - 1));
    double gsum = 0, gxhat = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < plane; ++i) {
        const double xhat = (xp[at(b, i)] - m) * inv;
        ey[at(b, i)] = static_cast<float>(xhat * gamma.data<float>()[ch] + beta.data<float>()[ch]);
        gsum += gp[at(b, i)];
        gxhat += gp[at(b, i)] * xhat;
      }
    egs[static_cast<size_t>(ch)] = static_cast<float>(gsum);
    egs[static_cast<size_t>(c + ch)] = static_cast<float>(gxhat);
    const double count = static_cast<double>(n * plane);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < plane; ++i) {
        const double xhat = (xp[at(b, i)] - m) * inv;
        edx[at(b, i)] = static_cast<float>(gamma.data<float>()[ch] * inv *
                                           (gp[at(b, i)] - gsum / count - xhat * gxhat / count));
      }
  }
  egs[static_cast<size_t>(2 * c)] = static_cast<float>(n * plane);
  EXPECT_LT(relative_error(host_values(mean), emean), 1e-6);
  EXPECT_LT(relative_error(host_values(invstd), einv), 1e-4);  // var ~0.3: invstd ~1.7, float sums
  EXPECT_LT(relative_error(host_values(rm), erm), 1e-6);
  EXPECT_LT(relative_error(host_values(rv), erv), 1e-5);
  EXPECT_EQ(host_values(sums)[static_cast<size_t>(2 * c)], static_cast<float>(n * plane));
  EXPECT_LT(relative_error(host_values(y), ey), 1e-4);
  EXPECT_LT(relative_error(host_values(grad_sums), egs), 1e-4);
  EXPECT_LT(relative_error(host_values(dx), edx), 1e-4);

  Tensor imean = on_device(Tensor({c})), iinv = on_device(Tensor({c}));
  kernels::batch_norm_inference_statistics(on_device(Tensor::from({1, 2}, {2})), on_device(Tensor::from({3, 4}, {2})),
                                           1e-5f, imean, iinv);
  EXPECT_EQ(host_values(imean), std::vector<float>({1, 2}));
  EXPECT_EQ(host_values(iinv), std::vector<float>({static_cast<float>(1 / std::sqrt(3.0 + 1e-5f)),
                                                   static_cast<float>(1 / std::sqrt(4.0 + 1e-5f))}));
}

TEST_P(ConvFamilyOn, StatisticsOfAnEmptyBatchAreRefusedOrNaN) {
  // The CPU checks the count on the host; on CUDA it stays on the device, and an empty
  // batch shows up as NaN instead (see dispatch_norm.cpp).
  const Tensor x = on_device(Tensor({0, 2, 3}));
  Tensor shift = on_device(Tensor({2})), sums = on_device(Tensor({5})), mean = on_device(Tensor({2}));
  Tensor invstd = on_device(Tensor({2})), rm = on_device(Tensor({2})), rv = on_device(Tensor::from({1, 1}, {2}));
  kernels::batch_norm_sums(x, shift, sums);
  EXPECT_EQ(host_values(sums), std::vector<float>({0, 0, 0, 0, 0}));
  if (device().is_cpu()) {
    EXPECT_THROW(kernels::batch_norm_statistics(sums, shift, 1e-5f, 0.1f, mean, invstd, rm, rv), Error);
    return;
  }
  kernels::batch_norm_statistics(sums, shift, 1e-5f, 0.1f, mean, invstd, rm, rv);
  for (float v : host_values(mean)) EXPECT_TRUE(std::isnan(v));
  for (float v : host_values(invstd)) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(host_values(rv), std::vector<float>({1, 1}));  // running statistics left alone
}

TEST_P(ConvFamilyOn, DropoutMasksDependOnTheGlobalSampleNotTheSplit) {
  Rng rng(4);
  const Tensor x = random_tensor({6, 50}, rng);
  Tensor whole_mask = on_device(Tensor({6, 50})), whole = on_device(Tensor({6, 50}));
  kernels::dropout_forward(on_device(x), 0.3f, 99, 0, whole_mask, whole);
  const std::vector<float> whole_values = host_values(whole);
  for (int64_t r = 0; r < 3; ++r) {
    Tensor part_mask = on_device(Tensor({2, 50})), part = on_device(Tensor({2, 50}));
    kernels::dropout_forward(on_device(x.view(r * 100, {2, 50})), 0.3f, 99, r * 2, part_mask, part);
    EXPECT_EQ(host_values(part), std::vector<float>(whole_values.begin() + r * 100, whole_values.begin() + r * 100 + 100))
        << "replica " << r;
  }
  // Element i of sample k is value i of stream (seed, k): the definition, on any device.
  const std::vector<float> mask = host_values(whole_mask);
  int64_t dropped = 0;
  for (int64_t k = 0; k < 6; ++k)
    for (int64_t i = 0; i < 50; ++i) {
      const float expected = counter_uniform(counter_stream_key(99, static_cast<uint64_t>(k)), static_cast<uint64_t>(i)) >= 0.3f
                                 ? 1.0f / 0.7f
                                 : 0.0f;
      ASSERT_EQ(mask[static_cast<size_t>(k * 50 + i)], expected) << "sample " << k << " element " << i;
      dropped += expected == 0.0f;
    }
  // 300 Bernoulli(0.3) draws: mean 90, sd ~7.9; 60..120 is beyond 3.5 sd.
  EXPECT_GT(dropped, 60);
  EXPECT_LT(dropped, 120);
  Tensor dx = on_device(Tensor({6, 50}));
  const Tensor dy = random_tensor({6, 50}, rng);
  kernels::dropout_backward(on_device(dy), whole_mask, dx);
  const std::vector<float> got = host_values(dx);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], dy.data<float>()[i] * mask[i]) << i;
}

TEST_P(ConvFamilyOn, AddMayWriteIntoAnOperand) {
  Tensor a = on_device(Tensor::from({1, 2, 3}, {3}));
  const Tensor b = on_device(Tensor::from({10, 20, 30}, {3}));
  Tensor y = on_device(Tensor({3}));
  kernels::add(a, b, y);
  EXPECT_EQ(host_values(y), std::vector<float>({11, 22, 33}));
  kernels::add(a, b, a);
  EXPECT_EQ(host_values(a), std::vector<float>({11, 22, 33}));
}

INSTANTIATE_TEST_SUITE_P(Devices, ConvFamilyOn, ::testing::ValuesIn(testing::kTestDevices), testing::device_name);

// ---- CPU vs GPU on larger random inputs -----------------------------------------------------

class ConvFamilyCpuGpu : public testing::CudaTest {
 protected:
  static Tensor gpu(const Tensor& t) { return testing::to_device(t, Device::cuda(0)); }
};

struct ConvCase {
  int64_t n, c, h, w, oc, k, stride, pad;
  bool bias, want_dx;
};

TEST_F(ConvFamilyCpuGpu, ConvolutionForwardAndBackward) {
  const ConvCase cases[] = {
      {4, 3, 12, 11, 8, 3, 1, 1, true, true},    // padding, non-square
      {4, 8, 14, 14, 16, 3, 2, 1, false, true},  // stride 2, no bias (the resnet's down-sampling)
      {3, 8, 9, 9, 4, 1, 2, 0, false, true},     // 1x1 shortcut
      {2, 1, 28, 28, 6, 5, 1, 0, true, false},   // the cnn's first layer: no dx
      {2, 3, 5, 5, 2, 5, 1, 2, true, true},      // kernel = input, padding 2
  };
  for (const ConvCase& k : cases) {
    SCOPED_TRACE(::testing::Message() << "x [" << k.n << ", " << k.c << ", " << k.h << ", " << k.w << "] kernel "
                                      << k.k << " stride " << k.stride << " pad " << k.pad << " bias " << k.bias
                                      << " dx " << k.want_dx);
    Rng rng(41);
    const Tensor x = random_tensor({k.n, k.c, k.h, k.w}, rng), w = random_tensor({k.oc, k.c, k.k, k.k}, rng);
    const Tensor b = random_tensor({k.oc}, rng);
    const kernels::Conv2dParams params{k.k, k.k, k.stride, k.pad};
    const int64_t oh = kernels::conv_output_size(k.h, k.k, k.stride, k.pad);
    const int64_t ow = kernels::conv_output_size(k.w, k.k, k.stride, k.pad);
    Tensor y_cpu({k.n, k.oc, oh, ow}), ws_cpu, ws_gpu;
    Tensor y_gpu = gpu(y_cpu);
    const Tensor b_gpu = gpu(b);
    kernels::conv2d_forward(x, w, k.bias ? &b : nullptr, params, y_cpu, ws_cpu);
    kernels::conv2d_forward(gpu(x), gpu(w), k.bias ? &b_gpu : nullptr, params, y_gpu, ws_gpu);
    EXPECT_LT(relative_error(host_values(y_cpu), host_values(y_gpu)), kTight);

    // Gradients start non-zero (they accumulate); dx starts as garbage (it is overwritten).
    const Tensor dy = random_tensor(y_cpu.shape(), rng);
    Tensor dw_cpu = random_tensor(w.shape(), rng), db_cpu = random_tensor({k.oc}, rng);
    Tensor dx_cpu = random_tensor(x.shape(), rng, 100.0f, 200.0f);
    Tensor dw_gpu = gpu(dw_cpu), db_gpu = gpu(db_cpu), dx_gpu = gpu(dx_cpu);
    for (int pass = 0; pass < 2; ++pass) {
      kernels::conv2d_backward(x, w, dy, params, k.want_dx ? &dx_cpu : nullptr, dw_cpu, k.bias ? &db_cpu : nullptr,
                               ws_cpu);
      kernels::conv2d_backward(gpu(x), gpu(w), gpu(dy), params, k.want_dx ? &dx_gpu : nullptr, dw_gpu,
                               k.bias ? &db_gpu : nullptr, ws_gpu);
    }
    EXPECT_LT(relative_error(host_values(dw_cpu), host_values(dw_gpu)), kTight);
    EXPECT_LT(relative_error(host_values(db_cpu), host_values(db_gpu)), kTight);
    EXPECT_LT(relative_error(host_values(dx_cpu), host_values(dx_gpu)), kTight);
    EXPECT_FALSE(ws_gpu.defined()) << "the CUDA path keeps to cuDNN's workspace";
  }
}

TEST_F(ConvFamilyCpuGpu, PoolingIsBitIdentical) {
  const kernels::Pool2dParams cases[] = {
      {2, 2, 2, 0},  // the cnn's pooling (the CPU's 2x2 fast path)
      {3, 3, 2, 1},  // overlapping windows with padding
      {3, 3, 1, 1},  // every element in up to nine windows
      {2, 3, 1, 1},  // non-square windows
      {7, 7, 1, 0},  // a whole 7x7 plane (global pooling)
  };
  for (const kernels::Pool2dParams& p : cases) {
    SCOPED_TRACE(::testing::Message() << "window " << p.kernel_h << "x" << p.kernel_w << " stride " << p.stride
                                      << " pad " << p.padding);
    Rng rng(43);
    const Tensor x = integer_tensor({3, 5, 7, 7}, rng, 4);  // ties everywhere
    const Shape out = {3, 5, kernels::conv_output_size(7, p.kernel_h, p.stride, p.padding),
                       kernels::conv_output_size(7, p.kernel_w, p.stride, p.padding)};
    Tensor y_cpu(out), arg_cpu(out, DType::kI32), dx_cpu(x.shape());
    Tensor y_gpu = gpu(y_cpu), arg_gpu = gpu(arg_cpu), dx_gpu = gpu(dx_cpu);
    kernels::max_pool2d_forward(x, p, y_cpu, arg_cpu);
    kernels::max_pool2d_forward(gpu(x), p, y_gpu, arg_gpu);
    EXPECT_EQ(host_values(y_cpu), host_values(y_gpu));
    EXPECT_EQ(int_values(arg_cpu), int_values(arg_gpu));
    const Tensor dy = random_tensor(out, rng);
    kernels::max_pool2d_backward(dy, arg_cpu, p, dx_cpu);
    kernels::max_pool2d_backward(gpu(dy), arg_gpu, p, dx_gpu);
    EXPECT_EQ(host_values(dx_cpu), host_values(dx_gpu));

    const Tensor xr = random_tensor(x.shape(), rng);
    kernels::avg_pool2d_forward(xr, p, y_cpu);
    kernels::avg_pool2d_forward(gpu(xr), p, y_gpu);
    EXPECT_EQ(host_values(y_cpu), host_values(y_gpu));
    kernels::avg_pool2d_backward(dy, p, dx_cpu);
    kernels::avg_pool2d_backward(gpu(dy), p, dx_gpu);
    EXPECT_EQ(host_values(dx_cpu), host_values(dx_gpu));
  }
}

TEST_F(ConvFamilyCpuGpu, BatchNormPiecesAgree) {
  Rng rng(47);
  const int64_t n = 16, c = 12;
  // Channels far from zero and a shift away from the mean: the sums must not cancel.
  const Tensor x = random_tensor({n, c, 9, 7}, rng, 20.0f, 24.0f), dy = random_tensor(x.shape(), rng);
  const Tensor shift = random_tensor({c}, rng, 21.0f, 23.0f);
  const Tensor gamma = random_tensor({c}, rng, 0.5f, 1.5f), beta = random_tensor({c}, rng);
  const Tensor rm0 = random_tensor({c}, rng), rv0 = random_tensor({c}, rng, 0.5f, 2.0f);
  struct Side {
    Tensor x, dy, shift, gamma, beta, sums, mean, invstd, rm, rv, y, grad_sums, dx, imean, iinv;
  };
  auto run = [&](Device d) {
    auto on = [&](const Tensor& t) { return testing::to_device(t, d); };
    Side s{on(x), on(dy), on(shift), on(gamma), on(beta), on(Tensor({2 * c + 1})), on(Tensor({c})), on(Tensor({c})),
           on(rm0), on(rv0), on(Tensor(x.shape())), on(Tensor({2 * c + 1})), on(Tensor(x.shape())), on(Tensor({c})),
           on(Tensor({c}))};
    kernels::batch_norm_sums(s.x, s.shift, s.sums);
    kernels::batch_norm_statistics(s.sums, s.shift, 1e-5f, 0.1f, s.mean, s.invstd, s.rm, s.rv);
    kernels::batch_norm_apply(s.x, s.mean, s.invstd, s.gamma, s.beta, s.y);
    kernels::batch_norm_backward_sums(s.x, s.dy, s.mean, s.invstd, s.grad_sums);
    kernels::batch_norm_backward_input(s.x, s.dy, s.mean, s.invstd, s.gamma, s.grad_sums, s.dx);
    kernels::batch_norm_inference_statistics(s.rm, s.rv, 1e-5f, s.imean, s.iinv);
    return s;
  };
  const Side cpu = run(Device::cpu()), cuda = run(Device::cuda(0));
  EXPECT_LT(relative_error(host_values(cpu.sums), host_values(cuda.sums)), 1e-6);
  EXPECT_LT(relative_error(host_values(cpu.mean), host_values(cuda.mean)), 1e-6);
  EXPECT_LT(relative_error(host_values(cpu.invstd), host_values(cuda.invstd)), 1e-5);
  EXPECT_LT(relative_error(host_values(cpu.rm), host_values(cuda.rm)), 1e-6);
  EXPECT_LT(relative_error(host_values(cpu.rv), host_values(cuda.rv)), 1e-5);
  EXPECT_LT(relative_error(host_values(cpu.y), host_values(cuda.y)), 1e-5);
  EXPECT_LT(relative_error(host_values(cpu.grad_sums), host_values(cuda.grad_sums)), 1e-5);
  EXPECT_LT(relative_error(host_values(cpu.dx), host_values(cuda.dx)), 1e-5);
  // From identical running statistics the inference statistics are the same bits.
  Tensor imean({c}), iinv({c});
  kernels::batch_norm_inference_statistics(rm0, rv0, 1e-5f, imean, iinv);
  Tensor gmean = gpu(imean), ginv = gpu(iinv);
  kernels::batch_norm_inference_statistics(gpu(rm0), gpu(rv0), 1e-5f, gmean, ginv);
  EXPECT_EQ(host_values(imean), host_values(gmean));
  EXPECT_EQ(host_values(iinv), host_values(ginv));
}

TEST_F(ConvFamilyCpuGpu, BatchNormOfDenseActivations) {
  // [N, C] input (plane 1), as after a Linear layer.
  Rng rng(53);
  const Tensor x = random_tensor({40, 33}, rng, -3.0f, 5.0f), shift({33});
  Tensor sums_cpu({67});
  Tensor sums_gpu = gpu(sums_cpu);
  kernels::batch_norm_sums(x, shift, sums_cpu);
  kernels::batch_norm_sums(gpu(x), gpu(shift), sums_gpu);
  EXPECT_LT(relative_error(host_values(sums_cpu), host_values(sums_gpu)), 1e-6);
}

TEST_F(ConvFamilyCpuGpu, DropoutMasksAreBitIdentical) {
  Rng rng(59);
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
    for (int64_t first_sample : {int64_t{0}, int64_t{1000}}) {
      const Tensor x = random_tensor({33, 4, 5, 7}, rng);
      Tensor mask_cpu(x.shape()), y_cpu(x.shape());
      Tensor mask_gpu = gpu(mask_cpu), y_gpu = gpu(y_cpu);
      kernels::dropout_forward(x, p, 1234567, first_sample, mask_cpu, y_cpu);
      kernels::dropout_forward(gpu(x), p, 1234567, first_sample, mask_gpu, y_gpu);
      EXPECT_EQ(host_values(mask_cpu), host_values(mask_gpu)) << "p " << p << " first sample " << first_sample;
      EXPECT_EQ(host_values(y_cpu), host_values(y_gpu)) << "p " << p << " first sample " << first_sample;
      const Tensor dy = random_tensor(x.shape(), rng);
      Tensor dx_cpu(x.shape());
      Tensor dx_gpu = gpu(dx_cpu);
      kernels::dropout_backward(dy, mask_cpu, dx_cpu);
      kernels::dropout_backward(gpu(dy), mask_gpu, dx_gpu);
      EXPECT_EQ(host_values(dx_cpu), host_values(dx_gpu));
    }
  }
  // A buffer larger than one pass of the capped grid (4096 blocks x 256 threads).
  const Tensor big = random_tensor({8, 1 << 18}, rng);
  Tensor mask_cpu(big.shape()), y_cpu(big.shape());
  Tensor mask_gpu = gpu(mask_cpu), y_gpu = gpu(y_cpu);
  kernels::dropout_forward(big, 0.25f, 7, 3, mask_cpu, y_cpu);
  kernels::dropout_forward(gpu(big), 0.25f, 7, 3, mask_gpu, y_gpu);
  EXPECT_EQ(host_values(mask_cpu), host_values(mask_gpu));
}

TEST_F(ConvFamilyCpuGpu, AddIsBitIdentical) {
  Rng rng(61);
  const Tensor a = random_tensor({3, 1 << 20}, rng), b = random_tensor(a.shape(), rng);
  Tensor y_cpu(a.shape());
  Tensor y_gpu = gpu(y_cpu);
  kernels::add(a, b, y_cpu);
  kernels::add(gpu(a), gpu(b), y_gpu);
  EXPECT_EQ(host_values(y_cpu), host_values(y_gpu));
}

// 64 x 48 x 48 = 147456 elements per channel: the GPU splits each channel over several
// blocks. The parts are fixed by the size and added in order, so two runs give the same
// bits, and the sums agree with the CPU's.
TEST_F(ConvFamilyCpuGpu, BatchNormSumsSplitOverBlocksAreRepeatable) {
  Rng rng(57);
  const int64_t n = 64, c = 3, plane = 48 * 48;
  const Tensor x = random_tensor({n, c, 48, 48}, rng, 9.0f, 11.0f), dy = random_tensor(x.shape(), rng);
  const Tensor shift = Tensor::from({10, 10, 10}, {c});
  const Tensor mean = Tensor::from({10.01f, 9.99f, 10.0f}, {c}), invstd = Tensor::from({1.7f, 1.8f, 1.75f}, {c});
  Tensor sums_cpu({2 * c + 1}), grad_sums_cpu({2 * c + 1});
  kernels::batch_norm_sums(x, shift, sums_cpu);
  kernels::batch_norm_backward_sums(x, dy, mean, invstd, grad_sums_cpu);
  const Tensor xd = gpu(x), dyd = gpu(dy), shiftd = gpu(shift), meand = gpu(mean), invstdd = gpu(invstd);
  std::vector<float> first_sums, first_grad_sums;
  for (int run = 0; run < 3; ++run) {
    Tensor sums = gpu(Tensor({2 * c + 1})), grad_sums = gpu(Tensor({2 * c + 1}));
    kernels::batch_norm_sums(xd, shiftd, sums);
    kernels::batch_norm_backward_sums(xd, dyd, meand, invstdd, grad_sums);
    if (run == 0) {
      first_sums = host_values(sums);
      first_grad_sums = host_values(grad_sums);
      EXPECT_EQ(first_sums[2 * c], static_cast<float>(n * plane));
      EXPECT_LT(relative_error(first_sums, host_values(sums_cpu)), 1e-5);
      EXPECT_LT(relative_error(first_grad_sums, host_values(grad_sums_cpu)), 1e-5);
    } else {
      EXPECT_EQ(host_values(sums), first_sums) << "run " << run;
      EXPECT_EQ(host_values(grad_sums), first_grad_sums) << "run " << run;
    }
  }
}

}  // namespace
}  // namespace mirrored
