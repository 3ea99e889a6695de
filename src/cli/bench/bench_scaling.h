#pragma once
// `mirrored bench train --scaling`: the 1-replica baseline of the same configuration,
// measured in the same job right after the N-replica run, so both figures share the
// machine's conditions. Rank 0 runs it as a child process of the same program with
// `--launch local` and the launcher's variables removed (a world of one, every core of
// the host, the same global batch), while the other ranks wait without spinning.
#include <cstdint>
#include <string>
#include <vector>

namespace mirrored::cli {

struct BaselineRun {
  double samples_per_sec = 0.0;
  std::string output;  // the child's stdout
};

// Runs `mirrored bench train ARGS --launch local --steps STEPS --warmup WARMUP` with the
// launcher's environment variables removed; throws Error when it fails or prints no
// samples_per_sec line.
BaselineRun run_one_replica_baseline(const std::vector<std::string>& train_args, int64_t steps, int64_t warmup);

}  // namespace mirrored::cli
