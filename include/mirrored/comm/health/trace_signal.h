#pragma once
// SIGUSR2 asks every rank of a running job for its flight recorder's ring
// (comm/health/flight_recorder.h): `kill -USR2` on mpirun (which passes it to every rank) or
// `scancel --signal=USR2 JOB` writes <out>/trace/rank-<r>.jsonl without stopping the job,
// and `mirrored trace RUN_DIR` reads them. The handler only sets a flag; the collective
// watchdog's thread writes the dump (so a rank stuck inside a collective still answers).
//
// Not installed when SIGUSR2 is the preemption signal (preemption_signal = USR2): that
// signal then checkpoints and stops the run, as configured.
namespace mirrored::comm {

class TraceDumpSignal {
 public:
  // Installs the handler unless SIGUSR2 is the preemption signal (`usr2_preempts`: the
  // run's preemption_signal = USR2); restores the previous one on destruction.
  explicit TraceDumpSignal(bool usr2_preempts);
  ~TraceDumpSignal();
  TraceDumpSignal(const TraceDumpSignal&) = delete;
  TraceDumpSignal& operator=(const TraceDumpSignal&) = delete;

 private:
  bool installed_ = false;
  struct Saved;
  Saved* saved_ = nullptr;
};

}  // namespace mirrored::comm
