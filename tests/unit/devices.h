#pragma once
// The devices a kernel test runs on: the CPU always, the first GPU when one is usable.
// Tests parameterised over kTestDevices call skip_unless_present() first, so on a machine
// without a GPU the CUDA instances are reported as skipped, with the reason.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/tensor.h"
#include "mirrored/kernels/device_context.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
// GoogleTest prints parameters with this (the CTest names then say "cuda:0", not bytes).
inline void PrintTo(const Device& device, std::ostream* out) { *out << device.str(); }
}  // namespace mirrored

namespace mirrored::testing {

// Empty when a CUDA device is usable, else why not ("built without CUDA", the
// cudaGetDeviceCount error text).
inline std::string cuda_unavailable_reason() {
  static const std::string reason = [] {
    std::string why;
    return cuda_device_count(&why) > 0 ? std::string() : (why.empty() ? std::string("none visible") : why);
  }();
  return reason;
}

inline bool cuda_present() { return cuda_unavailable_reason().empty(); }

#define MIRRORED_SKIP_WITHOUT_CUDA()                                                    \
  do {                                                                                  \
    if (!::mirrored::testing::cuda_present())                                           \
      GTEST_SKIP() << "no CUDA device: " << ::mirrored::testing::cuda_unavailable_reason(); \
  } while (0)

inline const std::vector<Device> kTestDevices = {Device::cpu(), Device::cuda(0)};

inline std::string device_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda";
}

// A copy of `t` on `device` (same shape and dtype).
inline Tensor to_device(const Tensor& t, Device device) {
  Tensor out(t.shape(), t.dtype(), device);
  kernels::copy(t, out);
  return out;
}

// The host values of a float tensor wherever it lives.
inline std::vector<float> host_values(const Tensor& t) { return t.to_vector(); }

// The kernel context a test without a Runtime needs to run work on `device` (stream,
// library handles, plans): nothing for the CPU. Destroy it before the test ends, after
// the tensors and layers that queued work on it.
inline std::optional<kernels::DeviceContext> context_for(Device device) {
  if (!device.is_cuda()) return std::nullopt;
  return std::optional<kernels::DeviceContext>(std::in_place, device.index);
}

class DeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda()) MIRRORED_SKIP_WITHOUT_CUDA();
    context_ = context_for(GetParam());
  }
  Device device() const { return GetParam(); }
  Tensor on_device(const Tensor& t) const { return to_device(t, device()); }

 private:
  // A base-class member: destroyed after the members of the test (tensors, models).
  std::optional<kernels::DeviceContext> context_;
};

// The fixtures of every test that touches a GPU: launch/gpu_selftest.sh selects GPU tests by
// these fixtures (tests/tools/gpu_tests.py lists the suites derived from them), and the CI
// test it.gpu_test_fixtures fails when a test that touches a CUDA device uses none of them.
//
// GpuTest: skips without a GPU; the test makes its own contexts (or a Runtime does).
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override { MIRRORED_SKIP_WITHOUT_CUDA(); }
};

// CudaTest: skips without a GPU, else holds a context for cuda:0 for the test's length.
class CudaTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    context_.emplace(0);
  }

 private:
  // A base-class member: destroyed after the members of the test (tensors, models).
  std::optional<kernels::DeviceContext> context_;
};

}  // namespace mirrored::testing
