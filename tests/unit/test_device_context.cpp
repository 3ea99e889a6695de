// The per-device kernel context: work on a GPU needs a live one, contexts of one device
// nest (the newest is in force), and a destroyed one leaves nothing registered.
#include <gtest/gtest.h>

#include <string>

#include "devices.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/device_context.h"

#ifdef MIRRORED_WITH_CUDA
#include "mirrored/core/cuda_resources.h"
#endif

namespace mirrored {
namespace {

#ifdef MIRRORED_WITH_CUDA
// Needs no GPU: the registry is asked before CUDA is.
TEST(DeviceContext, WorkWithoutAContextIsAClearError) {
  try {
    compute_stream(0);
    FAIL() << "a compute stream without a DeviceContext";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernels::DeviceContext"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compute_stream(-1), Error);
  EXPECT_THROW(compute_stream(64), Error);
}

// A GPU, but no context from the fixture: the test makes and destroys its own.
class DeviceContextOnGpu : public testing::GpuTest {};

TEST_F(DeviceContextOnGpu, ContextsNestAndUnregister) {
  {
    kernels::DeviceContext outer(0);
    EXPECT_EQ(outer.device(), 0);
    const cudaStream_t outer_stream = compute_stream(0);
    {
      kernels::DeviceContext inner(0);
      EXPECT_NE(compute_stream(0), outer_stream);
      // Kernels run on the inner context's stream; it is drained on destruction.
      Tensor t({1024}, DType::kF32, Device::cuda(0));
      kernels::scale(t, 2.0f);
      inner.synchronize();
    }
    EXPECT_EQ(compute_stream(0), outer_stream);
    // Moving keeps the registration: the state, not the handle, is registered.
    kernels::DeviceContext moved(std::move(outer));
    EXPECT_EQ(compute_stream(0), outer_stream);
  }
  EXPECT_THROW(compute_stream(0), Error);
}
#else
TEST(DeviceContext, NeedsTheCudaBuild) { EXPECT_THROW(kernels::DeviceContext(0), Error); }
#endif

}  // namespace
}  // namespace mirrored
