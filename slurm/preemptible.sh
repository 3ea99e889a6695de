#!/usr/bin/env bash
# Runs a launcher command (srun/mpirun ... mirrored train ...) from a batch script so the
# job survives preemption and time limits:
#   - Slurm's warning signal (#SBATCH --signal=B:USR1@N) reaches only the batch shell, so
#     it is forwarded here to the launcher, which passes it on to every rank;
#   - the trainer then writes a checkpoint at a step all ranks agree on and exits with
#     status 7 (preempted), and this script requeues the job (scontrol requeue). The
#     requeued job runs the same command; resume = auto continues from the checkpoint.
# usage (in a batch script): slurm/preemptible.sh srun --mpi=pmix build/mirrored train ...
set -uo pipefail
readonly PREEMPTED=7   # mirrored's exit status after a checkpoint-and-stop

"$@" &
child=$!
forward() {
  echo "preemptible.sh: SIGUSR1 (time limit or preemption ahead): asking the trainer to checkpoint and stop"
  kill -USR1 "$child" 2>/dev/null || true
}
trap forward USR1

status=0
while :; do
  wait "$child"
  status=$?
  # wait also returns when a trapped signal arrives; go on waiting while the child runs.
  kill -0 "$child" 2>/dev/null || break
done

if ((status == PREEMPTED)); then
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    echo "preemptible.sh: checkpoint written; requeueing job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0} -> $((${SLURM_RESTART_COUNT:-0} + 1)))"
    scontrol requeue "$SLURM_JOB_ID" || { echo "preemptible.sh: scontrol requeue failed" >&2; exit 1; }
  fi
  exit 0
fi
exit "$status"
