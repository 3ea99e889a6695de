# shellcheck shell=bash
# Helpers for tests that submit jobs to a real one-node Slurm (slurm/local-cluster.sh).
# Source after lib.sh. Skips (exit 77) with the reason when Slurm cannot run here.
require_slurm() {
  [[ $(id -u) -eq 0 ]] || { echo "SKIP: the local Slurm cluster needs root"; exit 77; }
  local tool
  for tool in slurmctld slurmd munged sbatch; do
    command -v "$tool" >/dev/null ||
      { echo "SKIP: $tool not installed (launch/install_deps.sh --test installs slurm-wlm and munge)"; exit 77; }
  done
}

# slurm_up: a private cluster under $WORK/slurm on free ports, stopped when the script exits.
slurm_up() {
  SLURM_BASE=$WORK/slurm
  chmod 0755 "$WORK"  # munged wants its socket's directories searchable by all
  local ports
  ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
  export SLURMCTLD_PORT=${ports% *} SLURMD_PORT=${ports#* }
  trap 'slurm_cleanup $?' EXIT
  "$SOURCE_DIR/slurm/local-cluster.sh" up "$SLURM_BASE" >"$WORK/slurm-up.log" 2>&1 ||
    { cat "$WORK/slurm-up.log"; fail "slurm/local-cluster.sh up failed"; }
  export SLURM_CONF=$SLURM_BASE/slurm.conf
}

# job_field JOBID FIELD: a field of `scontrol show job` (while the job is known).
job_field() {
  scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# wait_requeued JOB: until JOB, which its batch script requeued (preempted: exit 7, or asking
# to grow back: exit 11), waits in the queue again (PENDING, Restarts=1); at most 120 s. Fails
# at once when the job completed instead: the signal came after its last step.
wait_requeued() {
  wait_until 120 "job $1 to be requeued (PENDING, Restarts=1)" job_requeued "$1"
}
job_requeued() {
  local state
  state=$(job_field "$1" JobState)
  [[ $state != COMPLETED ]] || fail "job $1 completed before the signal reached it: nothing was tested"
  [[ $state == PENDING && $(job_field "$1" Restarts) == 1 ]]
}

# release_requeued JOB: start the requeued JOB now rather than after Slurm's hold (120 s by
# default). slurmd refuses the job's new credential until the old one expires (CRED_EXPIRE,
# 5 s in slurm/local-cluster.sh): call it as soon as wait_requeued returns; it waits those 5 s.
release_requeued() {
  local requeued=$SECONDS
  until ((SECONDS - requeued > 5)); do sleep 0.1; done
  scontrol update JobId="$1" StartTime=now
}

# wait_job_done JOB FILE: until FILE (the run's final.h5) is written and JOB runs no more; at
# most 180 s.
wait_job_done() {
  wait_until 180 "job $1 to finish, writing $2" job_done "$1" "$2"
}
job_done() { [[ -s "$2" && $(job_field "$1" JobState) != RUNNING ]]; }

# On failure, the daemons' last words help more than the job's; then stop everything.
slurm_cleanup() {
  end_jobs
  if (($1 != 0)) && [[ -d "$SLURM_BASE/log" ]]; then
    echo "--- slurmctld.log (tail)"; tail -n 15 "$SLURM_BASE/log/slurmctld.log" 2>/dev/null || true
    echo "--- slurmd.log (tail)"; tail -n 25 "$SLURM_BASE/log/slurmd.log" 2>/dev/null || true
  fi
  "$SOURCE_DIR/slurm/local-cluster.sh" down "$SLURM_BASE" >/dev/null
  rm -rf "$WORK"
}
