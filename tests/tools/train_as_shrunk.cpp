// train_as_shrunk [mirrored train options...]
// `mirrored train` through the same library calls, with the global batch allowed to split
// unevenly over the ranks, as it does after a shrink (elastic_run.cpp sets
// uneven_batch_shares when the survivors go on). A run resumed from the checkpoint a
// shrink went on from, at the survivors' world size, must then reproduce the shrunk run
// bit for bit: nothing the recovery handed over (parameters, optimizer state, step, data
// position) may differ from what the checkpoint holds (tests/integration/spares.sh).
#include <string>
#include <vector>

#include "mirrored/app/run_training.h"
#include "mirrored/config/config.h"
#include "mirrored/config/library_options.h"
#include "mirrored/core/error.h"
#include "mirrored/runtime/runtime.h"
#include "train_tool_main.h"

namespace {

using namespace mirrored;

int train_as_shrunk(int& argc, char**& argv) {
  config::TrainConfig config = config::parse_train_config(std::vector<std::string>(argv + 1, argv + argc));
  config.uneven_batch_shares = true;
  runtime::Runtime runtime(argc, argv, config::library_options(config).runtime);
  const train::TrainSummary summary = app::run_training(config, runtime, {});
  const int status = summary.too_few_replicas ? static_cast<int>(ExitCode::kTooFewReplicas) : 0;
  runtime.set_exit_status(status);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  return test_tools::run_as_mirrored_main([&] { return train_as_shrunk(argc, argv); });
}
