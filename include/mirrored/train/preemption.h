#pragma once
// Checkpoint-and-stop on a signal: a preemption warning, or Ctrl-C.
//
// Preemption: Slurm sends a signal before it ends a job (#SBATCH --signal=B:USR1@60: 60 s
// before the time limit, or when the job is preempted); the batch script forwards it to
// every rank (slurm/preemptible.sh). The run ends with ExitCode::kPreempted (7); a requeued
// job resumes (resume = auto) and ends bit-identical to an uninterrupted run.
//
// Ctrl-C (SIGINT), as a Keras or PyTorch Lightning user expects a graceful stop: the first
// one says at once what will happen, and the run writes a checkpoint at the end of the
// step, as on a preemption warning, and stops without evaluation or final files, saying
// where it can resume; the command exits with ExitCode::kInterrupted (130, the shell's
// status for Ctrl-C) and the same command continues from that checkpoint. A second Ctrl-C
// stops at once (the default action of SIGINT), naming the checkpoint directory to resume
// from. (mpirun cannot pass SIGINT on and ends the job itself; launch/local.sh and
// launch/multinode.sh turn the first Ctrl-C into the preemption signal, mirrored_launch.)
//
// SIGTERM, when it is not the preemption signal, still ends the rank at once (the launcher
// ending the job: an interrupted mpirun, scancel, a time limit's end); the chief first says
// where the run resumes.
//
// The signal handlers only set an atomic flag (and write a preformatted line). After each
// step every rank contributes its flag to a max all-reduce, so all ranks see the signal at
// the same step even though it reaches them at different moments; then the chief writes a
// checkpoint of that step, all ranks wait for it (barrier), and the run ends.
//
// Growing back (elastic/grow_back.h): a shrunk job asked to return to its configured size
// stops the same way at a step boundary, writes the same checkpoint (waited for), records
// {"kind": "resize", "step", "world_size", "trigger", "time_ms"} in metrics.jsonl and ends with
// ExitCode::kResizeRequested (11), for the launch script to relaunch it at full size. It
// rides on the same flag and all-reduce, with the lowest precedence: a preemption or Ctrl-C
// at the same step wins (the job is stopped either way; their exit codes say what to do).
//
// Cost: one all-reduce of one int per step (tens of microseconds).
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/train/callback.h"

namespace mirrored::train {

// Asks the run to stop at the end of the current step for a relaunch at full size (the
// chief calls it; the step's all-reduce tells every rank). `trigger` names what asked
// ("command", "signal", "host-returned HOST") in the record. Ignored when a stop is already
// asked for. Main thread only.
void request_resize(const std::string& trigger);

class PreemptionHandler final : public Callback {
 public:
  // Installs the handlers: for `signal` (none for kNone), SIGINT, and SIGTERM when it is not
  // `signal`. The destructor restores the previous ones, except that a default (fatal)
  // disposition of the preemption signal becomes "ignore", so a late warning cannot kill a
  // run that has finished. One handler at a time.
  explicit PreemptionHandler(config::PreemptionSignal signal);
  ~PreemptionHandler() override;
  PreemptionHandler(const PreemptionHandler&) = delete;
  PreemptionHandler& operator=(const PreemptionHandler&) = delete;

  void on_train_begin(TrainContext& ctx) override;  // the lines the handlers write
  void on_step_end(TrainContext& ctx, const StepEnd& step) override;

 private:
  int signal_ = 0;  // the preemption signal; 0 for none
  std::string name_;
  struct Saved;
  Saved* saved_ = nullptr;  // the previous dispositions (struct sigaction, kept out of the header)
};

}  // namespace mirrored::train
