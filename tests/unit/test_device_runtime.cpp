// Device selection in the runtime, and batches moved to the GPU ahead of use.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <vector>

#include "devices.h"
#include "mirrored/core/error.h"
#include "mirrored/distribute/device_prefetcher.h"
#include "mirrored/runtime/gpu_info.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored {
namespace {

TEST(DeviceChoice, CudaWithoutAGpuIsAClearUsageError) {
  if (testing::cuda_present()) GTEST_SKIP() << "a GPU is present: device = cuda succeeds here";
  int argc = 0;
  char** argv = nullptr;
  try {
    runtime::Runtime runtime(argc, argv, {runtime::Launch::kLocal, runtime::DeviceChoice::kCuda});
    FAIL() << "device = cuda started without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("has no usable GPU"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(testing::cuda_unavailable_reason()), std::string::npos) << e.what();
  }
}

TEST(DeviceChoice, AutoFallsBackToTheCpuWithoutAGpu) {
  if (testing::cuda_present()) GTEST_SKIP() << "a GPU is present: auto picks it";
  int argc = 0;
  char** argv = nullptr;
  runtime::Runtime runtime(argc, argv, {runtime::Launch::kLocal, runtime::DeviceChoice::kAuto});
  EXPECT_TRUE(runtime.device().is_cpu());
  EXPECT_EQ(&runtime.device_communicator(), &runtime.world());
}

// The Runtime makes the device context itself: the fixture only asks for a GPU.
class DeviceChoiceOnGpu : public testing::GpuTest {};

// A world of one needs no NCCL: its device communicator is the local one, which takes
// device buffers.
TEST_F(DeviceChoiceOnGpu, CudaInAWorldOfOneGetsTheLocalDeviceCommunicator) {
  int argc = 0;
  char** argv = nullptr;
  runtime::Runtime runtime(argc, argv, {runtime::Launch::kLocal, runtime::DeviceChoice::kCuda});
  EXPECT_TRUE(runtime.device().is_cuda());
  EXPECT_EQ(runtime.device_communicator().backend(), "local");
  EXPECT_TRUE(runtime.device_communicator().capabilities().device_buffers);
  EXPECT_EQ(runtime.world().backend(), "local");
  EXPECT_NE(runtime.cluster().table().find("cuda:"), std::string::npos);
}

TEST_F(DeviceChoiceOnGpu, BadDeviceOverrideNamesTheVariable) {
  setenv("MIRRORED_CUDA_DEVICE", "first", 1);
  int argc = 0;
  char** argv = nullptr;
  EXPECT_THROW(
      {
        try {
          runtime::Runtime runtime(argc, argv, {runtime::Launch::kLocal, runtime::DeviceChoice::kCuda});
        } catch (const Error& e) {
          unsetenv("MIRRORED_CUDA_DEVICE");
          EXPECT_NE(std::string(e.what()).find("MIRRORED_CUDA_DEVICE"), std::string::npos);
          throw;
        }
      },
      Error);
  unsetenv("MIRRORED_CUDA_DEVICE");
}

TEST(GpuInfo, VersionsAndDevicesAreReported) {
  const std::string versions = runtime::cuda_versions_string();
  if (cuda_built()) {
    EXPECT_NE(versions.find("cuDNN 9."), std::string::npos) << versions;
    EXPECT_NE(versions.find("NCCL 2."), std::string::npos) << versions;
  } else {
    EXPECT_NE(versions.find("not built"), std::string::npos) << versions;
  }
  const std::string gpus = runtime::local_gpus_string();
  if (testing::cuda_present()) {
    EXPECT_NE(gpus.find("cuda:0"), std::string::npos) << gpus;
  } else {
    EXPECT_EQ(gpus.rfind("none (", 0), 0u) << gpus;
  }
}

// Batch `step` is filled with the value `step` (images) and step % 10 (labels).
void fill_step(int64_t step, Tensor& images, Tensor& labels) {
  ensure_shape(images, {8, 1, 4, 4});
  ensure_shape(labels, {8}, DType::kI32);
  for (int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = static_cast<float>(step);
  for (int64_t i = 0; i < 8; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(step % 10);
}

class DevicePrefetcherOnGpu : public testing::CudaTest {};

TEST_F(DevicePrefetcherOnGpu, DeliversEachStepOnTheDeviceAndPrefetchesTheNext) {
  std::atomic<int> produced{0};
  distribute::DevicePrefetcher prefetcher(Device::cuda(0), [&](int64_t step, Tensor& images, Tensor& labels) {
    ++produced;
    fill_step(step, images, labels);
  });
  const int64_t steps = 12;
  for (int64_t step = 0; step < steps; ++step) {
    const auto batch = prefetcher.get(step, step + 1 < steps ? step + 1 : -1);
    ASSERT_TRUE(batch.images->device().is_cuda());
    // A kernel on the compute stream sees this step's data (scale by 2 in place).
    Tensor images = *batch.images;
    kernels::scale(images, 2.0f);
    for (float v : images.to_vector()) ASSERT_EQ(v, 2.0f * static_cast<float>(step)) << "step " << step;
  }
  EXPECT_EQ(prefetcher.prefetched(), steps - 1);  // every step after the first was ready
  EXPECT_EQ(produced.load(), steps);
  // A new epoch starts over at step 0 with new contents: nothing stale is handed out.
  prefetcher.reset();
  const auto again = prefetcher.get(0, 1);
  EXPECT_EQ(again.images->to_vector().front(), 0.0f);
}

TEST_F(DevicePrefetcherOnGpu, ProducerErrorsReachTheCaller) {
  distribute::DevicePrefetcher prefetcher(Device::cuda(0), [](int64_t step, Tensor& images, Tensor& labels) {
    if (step == 1) throw InputError("sample 1 is unreadable");
    fill_step(step, images, labels);
  });
  prefetcher.get(0, 1);
  EXPECT_THROW(prefetcher.get(1, 2), InputError);
}

// Batch `step` has 4 * (step + 1) samples (each new batch outgrows the slot's buffers, so
// every fill allocates) whose images hold step + 1: never zero.
void fill_growing(int64_t step, Tensor& images, Tensor& labels) {
  const int64_t n = 4 * (step + 1);
  images = Tensor({n, 1, 16, 16});
  labels = Tensor({n}, DType::kI32);
  for (int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = static_cast<float>(step + 1);
  for (int64_t i = 0; i < n; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(step + 1);
}

// Queues a few large matrix products: the compute stream stays busy for milliseconds.
void keep_compute_busy(const Tensor& a, Tensor& c) {
  for (int i = 0; i < 4; ++i) kernels::gemm(false, false, 1.0f, a, a, 0.0f, c);
}

TEST_F(DevicePrefetcherOnGpu, NewSlotBuffersAreNotZeroedAfterTheirCopy) {
  Tensor a({2048, 2048}, DType::kF32, Device::cuda(0)), c({2048, 2048}, DType::kF32, Device::cuda(0));
  kernels::copy(Tensor::from(std::vector<float>(static_cast<size_t>(a.numel()), 1e-3f), a.shape()), a);
  constexpr int kRounds = 25;
  constexpr int64_t kSteps = 6;
  for (int round = 0; round < kRounds; ++round) {
    // A new prefetcher: its slots are allocated while the compute stream is busy.
    keep_compute_busy(a, c);
    distribute::DevicePrefetcher prefetcher(Device::cuda(0), fill_growing);
    for (int64_t step = 0; step < kSteps; ++step) {
      keep_compute_busy(a, c);
      const auto batch = prefetcher.get(step, step + 1 < kSteps ? step + 1 : -1);
      const float expected = static_cast<float>(step + 1);
      const std::vector<float> images = batch.images->to_vector();
      ASSERT_EQ(images.size(), static_cast<size_t>(4 * (step + 1) * 16 * 16));
      for (size_t i = 0; i < images.size(); ++i)
        ASSERT_EQ(images[i], expected) << "round " << round << ", step " << step << ", element " << i;
      Tensor labels(batch.labels->shape(), DType::kI32);
      kernels::copy(*batch.labels, labels);
      for (int64_t i = 0; i < labels.numel(); ++i)
        ASSERT_EQ(labels.data<int32_t>()[i], static_cast<int32_t>(step + 1)) << "round " << round << ", step " << step;
    }
  }
}

TEST(DevicePrefetcher, NeedsTheCudaBuild) {
  if (cuda_built()) GTEST_SKIP() << "CUDA build: construction succeeds (tested above on a GPU)";
  EXPECT_THROW(distribute::DevicePrefetcher(Device::cuda(0), fill_step), Error);
}

}  // namespace
}  // namespace mirrored
