#pragma once
// Who the job lost and what the survivors do about it: the membership after a shrink, which
// survivor ends a lost rank that is only stopped, and the record of the change
// (MembershipReporter). Pure functions of the facts every survivor holds alike
// (runtime::Runtime::job_members(), runtime::ShrunkJob), so each computes the same answer.
#include <cstdint>
#include <string>
#include <vector>

#include "mirrored/core/timer.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/callback.h"

namespace mirrored::elastic {

// A rank the job lost, as it was known before the shrink.
struct LostRank {
  int rank = 0;
  std::string host;
};

// The job after a shrink: the survivors' world and who was lost.
struct Membership {
  int world_size = 0;
  std::vector<LostRank> lost;
};

// The ranks of `before` (the job before the shrink, by job rank) that no survivor of
// `shrunk` was, and the survivors' number.
Membership membership_after(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk);

// The lost ranks that this survivor (shrunk.rank) ends should they still be there: those
// whose host it is the lowest survivor on. mpirun waits for every process it started, so a
// lost rank that is only stopped (SIGSTOP, a hang) would keep the job from ending.
std::vector<int> lost_ranks_to_end(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk,
                                   const Membership& membership);

// "rank 2 (host-b), rank 3 (host-b)", or "no rank".
std::string describe_lost(const Membership& membership);

// A completed recovery: the new membership and where the run goes on from.
struct Recovery {
  Membership membership;
  int64_t step = 0;        // the step the run goes on from
  std::string checkpoint;  // the file it resumes from; empty: the newest checkpoint
};

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
