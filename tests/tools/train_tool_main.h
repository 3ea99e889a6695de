#pragma once
// The end of a test tool that trains through the library the way `mirrored train` does
// (train_with_extra_barrier, train_as_shrunk): as mirrored's main, the error once, then
// every rank of the job ends (Runtime::abort_job), so a failing tool never leaves a rank
// waiting in a collective.
#include <exception>

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::test_tools {

// `train()` (returning the exit status) with mirrored's own start and error handling.
template <typename Train>
int run_as_mirrored_main(Train&& train) {
  try {
    runtime::Runtime::identify_from_launcher();
    return train();
  } catch (const Error& error) {
    rank_error(error.what());
    runtime::Runtime::abort_job(error.code());
  } catch (const std::exception& error) {
    rank_error(str_cat("unexpected error: ", error.what()));
    runtime::Runtime::abort_job(ExitCode::kFailure);
  }
}

}  // namespace mirrored::test_tools
