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

// A rank the job lost, as it was known before the shrink: its world rank (a spare's: its
// job rank), its host and its job rank.
struct LostRank {
  int rank = 0;
  std::string host;
  int job_rank = 0;
};

// A lost training rank whose place a spare took: world rank `rank` on `host`, now the
// spare that was job rank `by_job_rank` on `by_host`.
struct Replacement {
  int rank = 0;
  std::string host;
  std::string by_host;
  int job_rank = 0;     // the lost rank's, in the job before the shrink
  int by_job_rank = 0;  // the spare's, in the job before the shrink
};

// The job after a shrink: the world the training goes on in and who was lost.
struct Membership {
  int world_size = 0;
  std::vector<LostRank> lost;          // training ranks lost with no spare to take their place
  std::vector<Replacement> replaced;   // training ranks lost whose places spares took
  std::vector<LostRank> lost_spares;   // spares lost (rank: their job rank)
  int spares_left = 0;
  bool with_spares = false;  // the job started with spares: its records say how they fared
  // The ranks that train next, as ranks of the shrunk job, in world order: every surviving
  // training rank at its place, a spare at each replaced one's (runtime::rebuild_communicators).
  std::vector<int> world;
  bool lost_any() const { return !lost.empty() || !replaced.empty() || !lost_spares.empty(); }
};

// Who takes whose place after a shrink. `before`: the job before the shrink, by job rank;
// `training`: its ranks that trained, in world order (the others were spares); `shrunk`:
// the survivors. Each lost training rank, in world order, gets the lowest surviving spare
// left (so a spare node's ranks take a lost node's places in order, local ranks alike);
// with none left it is lost and the world shrinks past it, the survivors keeping their
// order. A lost spare is only recorded.
Membership membership_after(const std::vector<runtime::JobMember>& before, const std::vector<int>& training,
                            const runtime::ShrunkJob& shrunk);
// The survivors `after` (the job members after one shrink or several, by job rank; this
// process is job rank `rank`) as one shrink of `before`, matched by first-world rank: a
// recovery that a further loss started over still decides from the membership it began with.
runtime::ShrunkJob shrink_of(const std::vector<runtime::JobMember>& before, const std::vector<runtime::JobMember>& after,
                             int rank);

// Without spares: every rank of `before` trained, in job order.
Membership membership_after(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk);

// The lost ranks that this survivor (shrunk.rank) ends should they still be there: those
// whose host it is the lowest survivor on. mpirun waits for every process it started, so a
// lost rank that is only stopped (SIGSTOP, a hang) would keep the job from ending.
std::vector<int> lost_ranks_to_end(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk,
                                   const Membership& membership);

// "rank 2 (host-b), rank 3 (host-b)", or "no rank": the lost training ranks no spare replaced.
std::string describe_lost(const Membership& membership);
// Every change: "rank 1 (a) replaced by a spare on c, lost spare 4 (c)"; describe_lost()
// when nothing was replaced and no spare lost.
std::string describe_change(const Membership& membership);

// A completed recovery: the new membership and where the run goes on from.
struct Recovery {
  Membership membership;
  int64_t step = 0;        // the step the run goes on from
  std::string checkpoint;  // the file it resumes from; empty: the newest checkpoint
};

// Reports a recovery once the first step after it has completed: a progress line, and the
// record {"kind": "membership", "step", "world_size", "lost": [{"rank", "host"}],
// "recovery_s"} in metrics.jsonl, recovery_s counted from the failure's detection; with
// spares also "replaced": [{"rank", "host", "by_host"}], "spares_lost": [{"rank", "host"}]
// (job ranks) and "spares" (how many are left). A loss after the last step (in the final
// evaluation) leaves no step to wait for: it is reported when the resumed run ends, and
// recovery_s counts to that end.
class MembershipReporter final : public train::Callback {
 public:
  MembershipReporter(Recovery recovery, Stopwatch since_failure)
      : recovery_(std::move(recovery)), since_failure_(since_failure) {}
  void on_step_end(train::TrainContext& ctx, const train::StepEnd& end) override;
  void on_train_end(train::TrainContext& ctx, const train::TrainSummary& summary) override;

 private:
  void report(train::TrainContext& ctx, const char* until);

  Recovery recovery_;
  Stopwatch since_failure_;
  bool reported_ = false;
};

}  // namespace mirrored::elastic
