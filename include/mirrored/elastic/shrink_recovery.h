#pragma once
// on_failure = shrink: what the survivors do after a lost rank (comm::PeerFailure), between
// the Trainer that failed and the one that goes on.
//
//   1. the Runtime revokes every communicator, shrinks the world to the live ranks and
//      rebuilds its communicators (runtime/runtime.h); the lowest survivor is the chief;
//   2. the survivors agree on the last completed step: the most steps any of them finished
//      (a rank may have completed the interrupted step's all-reduce before the failure
//      reached it); the lowest survivor holding that step sends its state to the chief.
//      Sharded optimizer state: the newest step at which every shard survives, on its
//      owner or on its keeper (distribute/shard_copies.h), each shard from one holder;
//      a shard whose owner and keeper were both lost ends the run (kTooFewReplicas) with
//      nothing written, naming them;
//   3. the chief writes that state as the checkpoint of that step (the ordinary format, so
//      a requeued job can resume from it too), and a new Trainer resumes from it at the new
//      world size with the same global batch: no step is lost, the interrupted one is redone.
// Below shrink.min_replicas survivors, or when the global batch does not divide over them,
// the checkpoint is still written and every survivor ends with ExitCode::kTooFewReplicas.
#include <optional>
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/core/timer.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/callback.h"
#include "mirrored/train/trainer.h"

namespace mirrored::elastic {

struct Recovery {
  runtime::Membership membership;
  int64_t step = 0;        // the step the run goes on from
  std::string checkpoint;  // the file it resumes from
};

// Collective over the survivors. `snapshot`: this rank's state after the failure (none
// when the failure came before a Trainer existed; the newest checkpoint is used then).
// Throws Error(kTooFewReplicas) after writing the checkpoint when the run cannot go on.
Recovery recover_after_failure(const config::TrainConfig& config, runtime::Runtime& runtime,
                               const std::optional<checkpoint::ReplicaSnapshot>& snapshot);

// Reports a recovery once the first step after it has completed: a progress line, and the
// record {"kind": "membership", "step", "world_size", "lost": [{"rank", "host"}],
// "recovery_s"} in metrics.jsonl, recovery_s counted from the failure's detection.
class MembershipReporter final : public train::Callback {
 public:
  MembershipReporter(Recovery recovery, Stopwatch since_failure)
      : recovery_(std::move(recovery)), since_failure_(since_failure) {}
  void on_step_end(train::TrainContext& ctx, const train::StepEnd& end) override;

 private:
  Recovery recovery_;
  Stopwatch since_failure_;
  bool reported_ = false;
};

}  // namespace mirrored::elastic
