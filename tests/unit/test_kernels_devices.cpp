// The op set on every device present: each op against a naive loop worked out here, in
// double, on the CPU and (when a GPU is usable) on CUDA; then CPU-vs-GPU agreement on
// larger random inputs, with the relative-error helper. Without a GPU the CUDA instances
// are skipped with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "devices.h"
#include "gradcheck.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

using testing::DeviceTest;
using testing::host_values;
using testing::random_tensor;
using testing::relative_error;

constexpr double kTight = 1e-5;  // float32 vs a double reference on O(1) values

Tensor labels_tensor(const std::vector<int32_t>& values, Device device) {
  Tensor host({static_cast<int64_t>(values.size())}, DType::kI32);
  std::copy(values.begin(), values.end(), host.data<int32_t>());
  return testing::to_device(host, device);
}

class KernelsOn : public DeviceTest {};

TEST_P(KernelsOn, GemmAllTransposesMatchNaiveLoop) {
  const int64_t m = 5, n = 7, k = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Rng rng(3);
      const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng);
      const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng);
      const Tensor c0 = random_tensor({m, n}, rng);
      const float* A = a.data<float>();
      const float* B = b.data<float>();
      std::vector<float> expected(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0.0;
          for (int64_t p = 0; p < k; ++p)
            sum += static_cast<double>(ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
          expected[static_cast<size_t>(i * n + j)] = static_cast<float>(1.5 * sum + 0.5 * c0.data<float>()[i * n + j]);
        }
      Tensor c = on_device(c0);
      kernels::gemm(ta, tb, 1.5f, on_device(a), on_device(b), 0.5f, c);
      EXPECT_LT(relative_error(host_values(c), expected), kTight) << "ta=" << ta << " tb=" << tb;
    }
  }
}

TEST_P(KernelsOn, BiasForwardAndGradient) {
  Rng rng(5);
  const Tensor y0 = random_tensor({4, 3}, rng), bias = random_tensor({3}, rng), db0 = random_tensor({3}, rng);
  Tensor y = on_device(y0), db = on_device(db0);
  kernels::add_bias(y, on_device(bias));
  kernels::accumulate_bias_grad(on_device(y0), db);
  std::vector<float> expected_y(12), expected_db(3);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) {
      expected_y[static_cast<size_t>(r * 3 + c)] = y0.data<float>()[r * 3 + c] + bias.data<float>()[c];
      expected_db[static_cast<size_t>(c)] += y0.data<float>()[r * 3 + c];
    }
  for (int c = 0; c < 3; ++c) expected_db[static_cast<size_t>(c)] += db0.data<float>()[c];
  EXPECT_LT(relative_error(host_values(y), expected_y), kTight);
  EXPECT_LT(relative_error(host_values(db), expected_db), kTight);
}

TEST_P(KernelsOn, ReluForwardAndBackward) {
  const Tensor x = Tensor::from({-2.0f, -0.0f, 0.5f, 3.0f, -1e-8f, 7.0f}, {2, 3});
  const Tensor dy = Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = on_device(Tensor({2, 3})), dx = on_device(Tensor({2, 3}));
  kernels::relu_forward(on_device(x), y);
  kernels::relu_backward(y, on_device(dy), dx);
  EXPECT_EQ(host_values(y), (std::vector<float>{0, 0, 0.5f, 3, 0, 7}));
  EXPECT_EQ(host_values(dx), (std::vector<float>{0, 0, 3, 4, 0, 6}));
}

TEST_P(KernelsOn, SoftmaxCrossEntropyLossAccuracyAndGradient) {
  // Row 1 ties classes 0 and 2: the first index wins (torch.argmax), so it is a miss.
  const Tensor logits = Tensor::from({1.0f, 2.0f, 0.5f, 3.0f, -1.0f, 3.0f, 100.0f, 0.0f, -100.0f}, {3, 3});
  const std::vector<int32_t> labels = {1, 2, 0};
  Tensor dlogits = on_device(Tensor({3, 3}));
  const auto result = kernels::softmax_cross_entropy(on_device(logits), labels_tensor(labels, device()), &dlogits, 0.5f);
  double loss = 0.0;
  std::vector<float> expected_grad(9);
  for (int r = 0; r < 3; ++r) {
    const float* x = logits.data<float>() + r * 3;
    const double mx = std::max({x[0], x[1], x[2]});
    double sum = 0.0;
    for (int j = 0; j < 3; ++j) sum += std::exp(x[j] - mx);
    loss += std::log(sum) - (x[labels[static_cast<size_t>(r)]] - mx);
    for (int j = 0; j < 3; ++j)
      expected_grad[static_cast<size_t>(r * 3 + j)] =
          static_cast<float>(0.5 * (std::exp(x[j] - mx) / sum - (j == labels[static_cast<size_t>(r)] ? 1.0 : 0.0)));
  }
  EXPECT_NEAR(result.loss_sum, loss, 1e-5);
  EXPECT_EQ(result.correct, 2);  // rows 0 and 2
  EXPECT_LT(relative_error(host_values(dlogits), expected_grad), kTight);
  // Without a gradient buffer: the same loss, nothing written.
  const auto no_grad = kernels::softmax_cross_entropy(on_device(logits), labels_tensor(labels, device()), nullptr, 1.0f);
  EXPECT_DOUBLE_EQ(no_grad.loss_sum, result.loss_sum);
}

TEST_P(KernelsOn, CrossEntropyRejectsALabelOutOfRange) {
  const Tensor logits = on_device(Tensor::from({1, 2, 3, 4}, {2, 2}));
  EXPECT_THROW(kernels::softmax_cross_entropy(logits, labels_tensor({0, 2}, device()), nullptr, 1.0f), Error);
  // The device is still usable afterwards.
  EXPECT_EQ(kernels::softmax_cross_entropy(logits, labels_tensor({1, 1}, device()), nullptr, 1.0f).correct, 2);
}

TEST_P(KernelsOn, ScaleAxpyAndFiniteness) {
  Tensor x = on_device(Tensor::from({1, -2, 4}, {3})), y = on_device(Tensor::from({10, 20, 30}, {3}));
  kernels::scale(x, 0.5f);
  kernels::axpy(2.0f, x, y);
  EXPECT_EQ(host_values(x), (std::vector<float>{0.5f, -1, 2}));
  EXPECT_EQ(host_values(y), (std::vector<float>{11, 18, 34}));
  EXPECT_TRUE(kernels::all_finite(y));
  // One bad value anywhere in a large buffer (past the first block) is found.
  std::vector<float> big(100000, 1.0f);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    big[77777] = bad;
    EXPECT_FALSE(kernels::all_finite(on_device(Tensor::from(big, {100000}))));
  }
}

TEST_P(KernelsOn, SgdMomentumNesterovAndWeightDecay) {
  for (bool nesterov : {false, true}) {
    const kernels::SgdHyper hyper{0.1f, 0.9f, 0.01f, nesterov};
    std::vector<float> p = {1.0f, -2.0f}, v = {0.5f, 0.25f};
    const std::vector<float> g = {0.3f, -0.7f};
    Tensor param = on_device(Tensor::from(p, {2})), vel = on_device(Tensor::from(v, {2}));
    kernels::sgd_update(param, on_device(Tensor::from(g, {2})), vel, hyper);
    for (size_t i = 0; i < 2; ++i) {
      const float gi = g[i] + 0.01f * p[i];
      v[i] = 0.9f * v[i] + gi;
      p[i] -= 0.1f * (nesterov ? gi + 0.9f * v[i] : v[i]);
    }
    EXPECT_LT(relative_error(host_values(param), p), kTight);
    EXPECT_LT(relative_error(host_values(vel), v), kTight);
  }
}

// The flag is written on the device and read by the update there: a gradient with a NaN
// or an infinity leaves parameters and state as they were, a finite one updates them.
TEST_P(KernelsOn, NonFiniteFlagMakesTheUpdatesSkipThemselves) {
  Tensor flag = on_device(Tensor({1}, DType::kI32));
  const Tensor finite = on_device(Tensor::from({0.5f, -1.0f}, {2}));
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
    const Tensor bad_grad = on_device(Tensor::from({0.5f, bad}, {2}));
    kernels::flag_non_finite(bad_grad, flag);
    Tensor host_flag({1}, DType::kI32);
    kernels::copy(flag, host_flag);
    EXPECT_EQ(host_flag.data<int32_t>()[0], 1) << bad;

    Tensor param = on_device(Tensor::from({1.0f, 2.0f}, {2})), vel = on_device(Tensor::from({0.1f, 0.2f}, {2}));
    kernels::sgd_update(param, bad_grad, vel, {0.1f, 0.9f, 0.0f, false}, &flag);
    EXPECT_EQ(host_values(param), std::vector<float>({1.0f, 2.0f}));
    EXPECT_EQ(host_values(vel), std::vector<float>({0.1f, 0.2f}));
    Tensor m = on_device(Tensor({2})), v = on_device(Tensor({2}));
    kernels::adam_update(param, bad_grad, m, v, {}, 1, &flag);
    EXPECT_EQ(host_values(param), std::vector<float>({1.0f, 2.0f}));
    EXPECT_EQ(host_values(m), std::vector<float>({0.0f, 0.0f}));
  }
  kernels::flag_non_finite(finite, flag);
  Tensor host_flag({1}, DType::kI32);
  kernels::copy(flag, host_flag);
  EXPECT_EQ(host_flag.data<int32_t>()[0], 0);
  Tensor param = on_device(Tensor::from({1.0f, 2.0f}, {2})), vel = on_device(Tensor({2}));
  kernels::sgd_update(param, finite, vel, {0.1f, 0.0f, 0.0f, false}, &flag);
  EXPECT_EQ(host_values(param), std::vector<float>({1.0f - 0.1f * 0.5f, 2.0f + 0.1f * 1.0f}));
  // A flag on another device than the parameters is refused.
  if (device().is_cuda()) {
    Tensor cpu_flag({1}, DType::kI32);
    EXPECT_THROW(kernels::sgd_update(param, finite, vel, {}, &cpu_flag), Error);
  }
}

TEST_P(KernelsOn, AdamAndAdamWMatchTheTorchFormulas) {
  for (bool decoupled : {false, true}) {
    kernels::AdamHyper hyper;
    hyper.lr = 0.01f;
    hyper.weight_decay = 0.1f;
    hyper.decoupled_weight_decay = decoupled;
    std::vector<double> p = {1.0, -0.5}, m = {0.0, 0.0}, v = {0.0, 0.0};
    const std::vector<float> g = {0.2f, -0.4f};
    Tensor param = on_device(Tensor::from({1.0f, -0.5f}, {2})), tm = on_device(Tensor({2})), tv = on_device(Tensor({2}));
    for (int64_t step = 1; step <= 3; ++step) {
      kernels::adam_update(param, on_device(Tensor::from(g, {2})), tm, tv, hyper, step);
      for (size_t i = 0; i < 2; ++i) {
        const double gi = g[i] + (decoupled ? 0.0 : 0.1 * p[i]);
        if (decoupled) p[i] *= 1.0 - 0.01 * 0.1;
        m[i] = 0.9 * m[i] + 0.1 * gi;
        v[i] = 0.999 * v[i] + 0.001 * gi * gi;
        const double mhat = m[i] / (1 - std::pow(0.9, step)), vhat = v[i] / (1 - std::pow(0.999, step));
        p[i] -= 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
      }
    }
    const auto got = host_values(param);
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(got[i], p[i], 1e-6) << "decoupled=" << decoupled << " i=" << i;
  }
}

TEST_P(KernelsOn, CopyBetweenHostAndDeviceRoundTrips) {
  Rng rng(9);
  const Tensor host = random_tensor({17, 3}, rng);
  const Tensor there = on_device(host);
  Tensor back({17, 3});
  kernels::copy(there, back);
  EXPECT_EQ(host_values(back), host_values(host));
  EXPECT_EQ(there.device(), device());
}

TEST_P(KernelsOn, RejectsTensorsOnDifferentDevices) {
  if (device().is_cpu()) GTEST_SKIP() << "needs a second device kind to mix with the CPU";
  Tensor x = on_device(Tensor({3})), y({3});
  EXPECT_THROW(kernels::axpy(1.0f, x, y), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, KernelsOn, ::testing::ValuesIn(testing::kTestDevices), testing::device_name);

// ---- CPU vs GPU on larger random inputs -------------------------------------------------

class CpuGpuAgreement : public testing::CudaTest {
 protected:
  static Tensor gpu(const Tensor& t) { return testing::to_device(t, Device::cuda(0)); }
};

TEST_F(CpuGpuAgreement, GemmOnLayerSizedMatrices) {
  Rng rng(21);
  const Tensor a = random_tensor({128, 784}, rng), w = random_tensor({256, 784}, rng);
  Tensor c_cpu({128, 256});
  Tensor c_gpu = gpu(c_cpu);
  kernels::gemm(false, true, 1.0f, a, w, 0.0f, c_cpu);
  kernels::gemm(false, true, 1.0f, gpu(a), gpu(w), 0.0f, c_gpu);
  EXPECT_LT(relative_error(host_values(c_cpu), host_values(c_gpu)), kTight);
}

TEST_F(CpuGpuAgreement, CrossEntropyOnAWideBatch) {
  Rng rng(22);
  const Tensor logits = random_tensor({1000, 37}, rng, -8.0f, 8.0f);  // more classes than a warp
  std::vector<int32_t> labels(1000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>((i * 7) % 37);
  Tensor d_cpu({1000, 37});
  Tensor d_gpu = gpu(d_cpu);
  const auto cpu = kernels::softmax_cross_entropy(logits, labels_tensor(labels, Device::cpu()), &d_cpu, 1e-3f);
  const auto cuda = kernels::softmax_cross_entropy(gpu(logits), labels_tensor(labels, Device::cuda(0)), &d_gpu, 1e-3f);
  EXPECT_NEAR(cuda.loss_sum, cpu.loss_sum, 1e-6 * std::abs(cpu.loss_sum));
  EXPECT_EQ(cuda.correct, cpu.correct);
  EXPECT_LT(relative_error(host_values(d_cpu), host_values(d_gpu)), kTight);
}

// The updates are the shared formulas of kernels/optimizer_math.h, one element per thread
// on the GPU, compiled there with -fmad=false (src/CMakeLists.txt) as the CPU's with
// -ffp-contract=off, and sqrt and division correctly rounded on both: the same bits.
TEST_F(CpuGpuAgreement, OptimizersGiveTheCpuBitsOverAMillionParameters) {
  Rng rng(23);
  const int64_t n = 1 << 20;
  const Tensor p0 = random_tensor({n}, rng), g = random_tensor({n}, rng);
  for (const bool decoupled : {false, true}) {
    kernels::AdamHyper adam;
    adam.weight_decay = 0.01f;
    adam.decoupled_weight_decay = decoupled;
    Tensor p_cpu = p0.clone(), m_cpu({n}), v_cpu({n});
    Tensor p_gpu = gpu(p0), m_gpu = gpu(m_cpu), v_gpu = gpu(v_cpu), g_gpu = gpu(g);
    for (int64_t step = 1; step <= 5; ++step) {
      kernels::adam_update(p_cpu, g, m_cpu, v_cpu, adam, step);
      kernels::adam_update(p_gpu, g_gpu, m_gpu, v_gpu, adam, step);
    }
    EXPECT_EQ(host_values(p_gpu), host_values(p_cpu)) << "decoupled=" << decoupled;
    EXPECT_EQ(host_values(m_gpu), host_values(m_cpu)) << "decoupled=" << decoupled;
    EXPECT_EQ(host_values(v_gpu), host_values(v_cpu)) << "decoupled=" << decoupled;
  }
  for (const bool nesterov : {false, true}) {
    const kernels::SgdHyper sgd{0.05f, 0.9f, 1e-4f, nesterov};
    Tensor p_cpu = p0.clone(), vel_cpu({n});
    Tensor p_gpu = gpu(p0), vel_gpu = gpu(vel_cpu), g_gpu = gpu(g);
    for (int i = 0; i < 5; ++i) {
      kernels::sgd_update(p_cpu, g, vel_cpu, sgd);
      kernels::sgd_update(p_gpu, g_gpu, vel_gpu, sgd);
    }
    EXPECT_EQ(host_values(p_gpu), host_values(p_cpu)) << "nesterov=" << nesterov;
    EXPECT_EQ(host_values(vel_gpu), host_values(vel_cpu)) << "nesterov=" << nesterov;
  }
}

}  // namespace
}  // namespace mirrored
