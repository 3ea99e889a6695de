// A whole model on every device present: finite-difference gradient checks through the
// device kernels, and CPU-vs-GPU agreement of forward, backward and an optimizer step, for
// the MLP and for the convolutional models (cnn with batch norm and dropout, resnet).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

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

class ModelCpuGpuAgreement : public testing::CudaTest {};  // its context outlives the models

TEST_F(ModelCpuGpuAgreement, ForwardBackwardAndSgdStep) {
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

// A convolutional model and a fixed batch of six samples, on one device.
struct ConvModelFixture {
  nn::Model model;
  nn::CrossEntropyLoss loss;
  Tensor x, labels;

  ConvModelFixture(nn::Model built, const Shape& sample, Device device) : model(std::move(built)) {
    model.build(sample, device);
    model.initialize(17);
    model.set_random_seed(23);  // dropout masks
    Rng rng(4);
    Shape batch = sample;
    batch.insert(batch.begin(), 6);
    x = testing::to_device(testing::random_tensor(batch, rng), device);
    Tensor host_labels({6}, DType::kI32);
    for (int i = 0; i < 6; ++i) host_labels.data<int32_t>()[i] = i % 5;
    labels = testing::to_device(host_labels, device);
  }
  // One training forward and backward at `step`: the loss, and the gradients in the arena.
  double gradients(int64_t step) {
    model.set_step(step);
    model.parameters().zero_grads();
    const double loss_sum = loss.forward(model.forward(x, nn::Mode::kTrain), labels).loss_sum;
    model.backward(loss.grad());
    return loss_sum;
  }
  std::vector<float> eval_logits() { return model.forward(x, nn::Mode::kEval).to_vector(); }
};

nn::Model small_cnn() {
  nn::CnnSpec spec;
  spec.channels = {4, 6};
  spec.kernel = 3;
  spec.padding = 1;
  spec.hidden = {16};
  spec.batchnorm = true;
  spec.dropout = 0.3f;
  spec.num_classes = 5;
  return nn::cnn(spec);
}

nn::Model small_resnet() {
  nn::ResNetSpec spec;
  spec.channels = {4, 8};  // the second stage down-samples through a 1x1 shortcut conv
  spec.blocks = 1;
  spec.num_classes = 5;
  return nn::resnet(spec);
}

// The same model trained for three SGD steps on the CPU and on the device under test:
// losses, gradients, running statistics, parameters and evaluation logits agree. Two CPU
// runs must agree exactly (same world size: bit-identical runs).
void expect_training_agrees(nn::Model (*make)(), const Shape& sample, Device device) {
  ConvModelFixture cpu(make(), sample, Device::cpu()), here(make(), sample, device);
  const double tolerance = device.is_cpu() ? 0.0 : 1e-4;
  optim::Sgd sgd_cpu(cpu.model.parameters(), {0.05f, 0.9f, 0.0f, false});
  optim::Sgd sgd_here(here.model.parameters(), {0.05f, 0.9f, 0.0f, false});
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const double loss_cpu = cpu.gradients(step), loss_here = here.gradients(step);
    EXPECT_NEAR(loss_here, loss_cpu, tolerance * std::max(1.0, std::abs(loss_cpu)));
    EXPECT_LE(relative_error(cpu.model.parameters().flat_grads().to_vector(),
                             here.model.parameters().flat_grads().to_vector()),
              tolerance);
    EXPECT_LE(relative_error(cpu.model.parameters().flat_buffers().to_vector(),
                             here.model.parameters().flat_buffers().to_vector()),
              tolerance);
    sgd_cpu.step();
    sgd_here.step();
  }
  EXPECT_LE(relative_error(cpu.model.parameters().flat_params().to_vector(),
                           here.model.parameters().flat_params().to_vector()),
            tolerance);
  EXPECT_LE(relative_error(cpu.eval_logits(), here.eval_logits()), tolerance);
}

class ConvModelOn : public DeviceTest {};

TEST_P(ConvModelOn, CnnWithBatchNormAndDropoutTrainsLikeOnTheCpu) {
  expect_training_agrees(small_cnn, {1, 12, 12}, device());
}

TEST_P(ConvModelOn, ResnetTrainsLikeOnTheCpu) { expect_training_agrees(small_resnet, {1, 8, 8}, device()); }

TEST_P(ConvModelOn, BatchNormBuffersStartAtZeroMeanUnitVariance) {
  ConvModelFixture f(small_resnet(), {1, 8, 8}, device());
  const nn::ParameterArena& arena = f.model.parameters();
  ASSERT_GT(arena.num_buffers(), 0u);
  for (size_t i = 0; i < arena.num_buffers(); ++i) {
    const nn::ParameterInfo& info = arena.buffer_info(i);
    const std::vector<float> values = arena.buffer(i).to_vector();
    const float expected = info.name.ends_with("running_var") ? 1.0f : 0.0f;
    for (float v : values) ASSERT_EQ(v, expected) << info.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ConvModelOn, ::testing::ValuesIn(testing::kTestDevices), testing::device_name);

}  // namespace
}  // namespace mirrored
