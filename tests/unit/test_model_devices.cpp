// A whole model on every device present: finite-difference gradient checks through the
// device kernels, and CPU-vs-GPU agreement of forward, backward and an optimizer step.
#include <gtest/gtest.h>

#include <memory>

#include "devices.h"
#include "gradcheck.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mirrored/optim/optimizer.h"

namespace mirrored {
namespace {

using testing::DeviceTest;
using testing::kGradTolerance;
using testing::relative_error;

// A small MLP (6 -> 5 -> 3) with a fixed batch, on one device.
struct MlpFixture {
  nn::Model model = nn::mlp({{5}, 3});
  nn::CrossEntropyLoss loss;
  Tensor x, labels;

  explicit MlpFixture(Device device) {
    model.build({6}, device);
    model.initialize(17);
    Rng rng(4);
    x = testing::to_device(testing::random_tensor({4, 6}, rng), device);
    Tensor host_labels({4}, DType::kI32);
    for (int i = 0; i < 4; ++i) host_labels.data<int32_t>()[i] = i % 3;
    labels = testing::to_device(host_labels, device);
  }
  double mean_loss() { return loss.forward(model.forward(x, nn::Mode::kTrain), labels, false).loss_sum / 4.0; }
  void gradients() {
    model.parameters().zero_grads();
    loss.forward(model.forward(x, nn::Mode::kTrain), labels);
    model.backward(loss.grad());
  }
};

class ModelOn : public DeviceTest {};

TEST_P(ModelOn, InitialisationIsTheSameOnEveryDevice) {
  MlpFixture on_cpu(Device::cpu()), here(device());
  EXPECT_EQ(here.model.parameters().flat_params().device(), device());
  EXPECT_EQ(here.model.parameters().flat_params().to_vector(), on_cpu.model.parameters().flat_params().to_vector());
}

TEST_P(ModelOn, GradientsMatchCentralDifferences) {
  MlpFixture f(device());
  f.gradients();
  const std::vector<float> analytic = f.model.parameters().flat_grads().to_vector();
  // Perturb one parameter at a time through a host copy of the flat buffer (the device
  // buffer cannot be written through a host pointer).
  Tensor& params = f.model.parameters().flat_params();
  std::vector<float> host = params.to_vector();
  std::vector<float> numeric(host.size());
  const float h = 1e-2f;
  auto loss_at = [&](size_t i, float value) {
    const float saved = host[i];
    host[i] = value;
    kernels::copy(Tensor::from(host, params.shape()), params);
    host[i] = saved;
    return f.mean_loss();
  };
  for (size_t i = 0; i < host.size(); ++i) {
    const double up = loss_at(i, host[i] + h), down = loss_at(i, host[i] - h);
    numeric[i] = static_cast<float>((up - down) / (static_cast<double>(host[i] + h) - (host[i] - h)));
  }
  EXPECT_LT(relative_error(analytic, numeric), kGradTolerance);
}

INSTANTIATE_TEST_SUITE_P(Devices, ModelOn, ::testing::ValuesIn(testing::kTestDevices), testing::device_name);

TEST(ModelCpuGpuAgreement, ForwardBackwardAndSgdStep) {
  MIRRORED_SKIP_WITHOUT_CUDA();
  MlpFixture cpu(Device::cpu()), gpu(Device::cuda(0));
  cpu.gradients();
  gpu.gradients();
  EXPECT_LT(relative_error(cpu.model.parameters().flat_grads().to_vector(),
                           gpu.model.parameters().flat_grads().to_vector()),
            1e-5);
  optim::Sgd sgd_cpu(cpu.model.parameters(), {0.1f, 0.9f, 0.0f, false});
  optim::Sgd sgd_gpu(gpu.model.parameters(), {0.1f, 0.9f, 0.0f, false});
  for (int step = 0; step < 3; ++step) {
    sgd_cpu.step();
    sgd_gpu.step();
    cpu.gradients();
    gpu.gradients();
  }
  EXPECT_LT(relative_error(cpu.model.parameters().flat_params().to_vector(),
                           gpu.model.parameters().flat_params().to_vector()),
            1e-5);
}

}  // namespace
}  // namespace mirrored
