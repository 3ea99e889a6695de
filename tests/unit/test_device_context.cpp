// The per-device kernel context: work on a GPU needs a live one, contexts of one device
// nest (the newest is in force), and a destroyed one leaves nothing registered.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// An event polled before its work is done answers cudaErrorNotReady, which the CUDA runtime
// also keeps as the thread's last error; the next launch check reads that error, so without
// clear_not_ready every kernel after a poll that found work in flight failed with
// "cudaErrorNotReady (600)". Polls while a large product runs, and launches after each.
TEST_F(DeviceContextOnGpu, APollThatFindsWorkInFlightLeavesNoErrorForTheNextLaunch) {
  kernels::DeviceContext context(0);
  const int64_t n = 4096;  // ~137 GFLOP: milliseconds on any GPU, so the first polls find it running
  const auto filled = [&](float value) {
    return testing::to_device(Tensor::from(std::vector<float>(static_cast<size_t>(n * n), value), {n, n}),
                              Device::cuda(0));
  };
  const Tensor a = filled(1.0f), b = filled(0.5f);
  Tensor c({n, n}, DType::kF32, Device::cuda(0)), small({256}, DType::kF32, Device::cuda(0));
  kernels::gemm(false, false, 1.0f, a, b, 0.0f, c);
  const CudaEvent event(0);
  event.record(compute_stream(0));
  int not_ready = 0;
  while (!event.done()) {
    ++not_ready;
    ASSERT_EQ(cudaPeekAtLastError(), cudaSuccess) << "a not-ready poll left an error behind";
    // A launch checked with cudaGetLastError (MIRRORED_CUDA_CHECK_LAUNCH) must pass.
    ASSERT_NO_THROW(kernels::scale(small, 1.0f)) << "after " << not_ready << " not-ready poll(s)";
    event.record(compute_stream(0));  // behind the launch just queued: still not done
    if (not_ready > 3) event.synchronize();
  }
  EXPECT_GT(not_ready, 0) << "the event was done at the first poll: nothing was checked";
  context.synchronize();
  EXPECT_EQ(c.to_vector()[0], 0.5f * static_cast<float>(n));
}
#else
TEST(DeviceContext, NeedsTheCudaBuild) { EXPECT_THROW(kernels::DeviceContext(0), Error); }
#endif

}  // namespace
}  // namespace mirrored
