// bf16 products and convolutions on a GPU (cuBLAS with bfloat16 inputs and float32
// compute; cuDNN's float32 plans on inputs rounded on the device) against the CPU's bf16
// results: the same rounded inputs, so they differ only by float32 accumulation order,
// within f32_accumulation_bound (bf16_bounds.h). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bf16_bounds.h"
#include "devices.h"
#include "gradcheck.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

using namespace testing;

Tensor absolute_tensor(const Tensor& t) {
  Tensor a(t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) a.data<float>()[i] = std::fabs(t.data<float>()[i]);
  return a;
}

class Bf16Cuda : public CudaTest {};  // with a context for cuda:0

TEST_F(Bf16Cuda, GemmMatchesTheCpuForEveryTranspose) {
  const int64_t m = 33, n = 47, k = 200;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Rng rng(7);
      const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng);
      const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng);
      const Tensor c0 = random_tensor({m, n}, rng);
      Tensor cpu = c0.clone(), gpu = to_device(c0, Device::cuda(0)), scale({m, n});
      kernels::gemm(ta, tb, 1.0f, a, b, 1.0f, cpu, Precision::kBF16);
      kernels::gemm(ta, tb, 1.0f, to_device(a, Device::cuda(0)), to_device(b, Device::cuda(0)), 1.0f, gpu,
                    Precision::kBF16);
      kernels::gemm(ta, tb, 1.0f, absolute_tensor(a), absolute_tensor(b), 0.0f, scale);
      std::vector<float> allowance = host_values(scale);
      for (size_t i = 0; i < allowance.size(); ++i) allowance[i] += std::fabs(c0.data<float>()[i]);
      expect_within(host_values(gpu), host_values(cpu), allowance, 2 * f32_accumulation_bound(k + 1),
                    ta ? (tb ? "TT" : "TN") : (tb ? "NT" : "NN"));
    }
}

TEST_F(Bf16Cuda, ConvolutionMatchesTheCpu) {
  const Device gpu = Device::cuda(0);
  Rng rng(9);
  const int64_t n = 2, c = 4, h = 8, oc = 6, k = 3;
  const Tensor x = random_tensor({n, c, h, h}, rng), w = random_tensor({oc, c, k, k}, rng),
               dy = random_tensor({n, oc, h, h}, rng);
  const kernels::Conv2dParams params{k, k, 1, 1};
  Tensor y({n, oc, h, h}), dx({n, c, h, h}), dw({oc, c, k, k}), ws;
  Tensor gy = to_device(y, gpu), gdx = to_device(dx, gpu), gdw = to_device(Tensor({oc, c, k, k}), gpu), gws;
  dw.zero();
  kernels::conv2d_forward(x, w, nullptr, params, y, ws, Precision::kBF16);
  kernels::conv2d_backward(x, w, dy, params, &dx, dw, nullptr, ws, Precision::kBF16);
  kernels::conv2d_forward(to_device(x, gpu), to_device(w, gpu), nullptr, params, gy, gws, Precision::kBF16);
  kernels::conv2d_backward(to_device(x, gpu), to_device(w, gpu), to_device(dy, gpu), params, &gdx, gdw, nullptr, gws,
                           Precision::kBF16);
  Tensor sy({n, oc, h, h}), sdx({n, c, h, h}), sdw({oc, c, k, k});
  sdw.zero();
  kernels::conv2d_forward(absolute_tensor(x), absolute_tensor(w), nullptr, params, sy, ws);
  kernels::conv2d_backward(absolute_tensor(x), absolute_tensor(w), absolute_tensor(dy), params, &sdx, sdw, nullptr, ws);
  expect_within(host_values(gy), host_values(y), host_values(sy), 2 * f32_accumulation_bound(c * k * k), "y");
  expect_within(host_values(gdx), host_values(dx), host_values(sdx), 2 * f32_accumulation_bound(oc * k * k), "dx");
  expect_within(host_values(gdw), host_values(dw), host_values(sdw), 2 * f32_accumulation_bound(n * h * h), "dW");
}

}  // namespace
}  // namespace mirrored
