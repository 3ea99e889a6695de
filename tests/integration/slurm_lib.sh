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

# On failure, the daemons' last words help more than the job's; then stop everything.
slurm_cleanup() {
  if (($1 != 0)) && [[ -d "$SLURM_BASE/log" ]]; then
    echo "--- slurmctld.log (tail)"; tail -n 15 "$SLURM_BASE/log/slurmctld.log" 2>/dev/null || true
    echo "--- slurmd.log (tail)"; tail -n 25 "$SLURM_BASE/log/slurmd.log" 2>/dev/null || true
  fi
  "$SOURCE_DIR/slurm/local-cluster.sh" down "$SLURM_BASE" >/dev/null
  rm -rf "$WORK"
}
