#pragma once
// Checkpoint-and-stop on a preemption warning. Slurm sends a signal before it ends a job
// (#SBATCH --signal=B:USR1@60: 60 s before the time limit, or when the job is preempted);
// the batch script forwards it to every rank (slurm/preemptible.sh).
//
// The signal handler only sets an atomic flag. After each step every rank contributes its
// flag to a max all-reduce, so all ranks see the signal at the same step even though it
// reaches them at different moments; then the chief writes a checkpoint of that step, all
// ranks wait for it (barrier), and the run ends without evaluation or final files. The
// command exits with ExitCode::kPreempted (7); a requeued job resumes (resume = auto) and
// ends bit-identical to an uninterrupted run.
//
// Cost: one all-reduce of one int per step (tens of microseconds).
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/train/callback.h"

namespace mirrored::train {

class PreemptionHandler final : public Callback {
 public:
  // Installs the handler for `signal` (not kNone); the destructor
  // restores the previous one, except that a default (fatal) disposition becomes "ignore",
  // so a late warning cannot kill a run that has finished. One handler at a time.
  explicit PreemptionHandler(config::PreemptionSignal signal);
  ~PreemptionHandler() override;
  PreemptionHandler(const PreemptionHandler&) = delete;
  PreemptionHandler& operator=(const PreemptionHandler&) = delete;

  void on_step_end(TrainContext& ctx, const StepEnd& step) override;

 private:
  int signal_ = 0;
  std::string name_;
  struct Saved;
  Saved* saved_ = nullptr;  // the previous disposition (struct sigaction, kept out of the header)
};

}  // namespace mirrored::train
