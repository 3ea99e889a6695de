// GoogleTest main for tests that run under mpirun: one Runtime for the whole binary, and
// only rank 0 prints results (a failure on any rank fails the process, and so the test).
#include <gtest/gtest.h>

#include "mpi_env.h"

namespace {
mirrored::runtime::Runtime* g_runtime = nullptr;
}

mirrored::runtime::Runtime& test_runtime() { return *g_runtime; }

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int status = 0;
  {
    mirrored::runtime::Runtime runtime(argc, argv, {mirrored::runtime::Launch::kMpi});
    g_runtime = &runtime;
    if (runtime.rank() != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
    }
    status = RUN_ALL_TESTS();
    // Every rank must agree on the outcome, or a failure on rank 3 would be invisible.
    status = runtime.world().allreduce_value<int32_t>(status, mirrored::comm::ReduceOp::kMax);
    g_runtime = nullptr;
  }
  return status;
}
