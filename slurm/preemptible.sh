#!/usr/bin/env bash
# Runs a launcher command (srun/mpirun ... mirrored train ...) from a batch script so the
# job survives preemption and time limits:
#   - Slurm's warning signal (#SBATCH --signal=B:USR1@N) reaches only the batch shell, so
#     it is forwarded here to the launcher, which passes it on to every rank. The signal is
#     the one the trainer listens for: `preemption_signal` from the command's flags
#     (--preemption_signal NAME), else from its --config file, else USR1 (the default);
#     MIRRORED_PREEMPTION_SIGNAL overrides. Keep #SBATCH --signal=B:<that signal>@N in step.
#   - the trainer then writes a checkpoint at a step all ranks agree on and exits with
#     status 7 (preempted), and this script requeues the job (scontrol requeue). The
#     requeued job runs the same command; resume = auto continues from the checkpoint.
#   - growing back: a job that lost ranks (on_failure = shrink) and is asked to grow back
#     (`mirrored resize RUN_DIR`, or `scancel --signal=URG --batch JOB`, which this script
#     passes on through the run-state file `resize`) writes a checkpoint and exits 11; the
#     job is requeued the same way, and the requeued job, at the full size of its request
#     (Slurm replaces a lost node), resumes from it and records the downtime, queue wait
#     included.
# usage (in a batch script): slurm/preemptible.sh srun --mpi=pmix build/mirrored train ...
set -uo pipefail
readonly PREEMPTED=7   # mirrored's exit status after a checkpoint-and-stop
readonly RESIZE=11     # ... after a checkpoint-and-stop to grow back at full size
# mirrored_exit_status: with a run-state directory (the sbatch scripts make one), a launcher
# that exits 0 although mirrored did not finish becomes exit 9, saying so.
source "$(dirname "$0")/../launch/mpi_env.sh"

# preemption_signal as the trainer will read it (launch/mpi_env.sh).
signal=$(mirrored_preemption_signal "$@")

case "$signal" in
  USR1|USR2|TERM|none) ;;
  *) echo "preemptible.sh: preemption_signal '$signal': expected USR1, USR2, TERM or none" >&2; exit 2 ;;
esac

"$@" &
child=$!
forward() {
  echo "preemptible.sh: SIG$signal (time limit or preemption ahead): asking the trainer to checkpoint and stop"
  kill -s "$signal" "$child" 2>/dev/null || true
  mirrored_relay_signal "$signal"  # ranks that outlived a lost node's runtime
}
# preemption_signal = none: nothing to forward.
[[ "$signal" == none ]] || trap forward "$signal"
# A request to grow back reaches the chief through the run-state directory.
trap 'mirrored_request_resize signal' URG

status=0
mirrored_wait_launcher "$child" "$(basename "$1")" || status=$?

# mirrored's own status (the chief's, also from ranks that outlived a lost node's runtime).
final=0
mirrored_exit_status "$(basename "$1")" "$status" || final=$?
if ((final == PREEMPTED || final == RESIZE)); then
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    ((final == RESIZE)) && echo "preemptible.sh: the job asked to grow back to its full size (exit $RESIZE)"
    echo "preemptible.sh: checkpoint written; requeueing job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0} -> $((${SLURM_RESTART_COUNT:-0} + 1)))"
    scontrol requeue "$SLURM_JOB_ID" || { echo "preemptible.sh: scontrol requeue failed" >&2; exit 1; }
  fi
  exit 0
fi
exit "$final"
