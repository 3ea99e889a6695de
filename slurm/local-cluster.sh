#!/usr/bin/env bash
# A real one-node Slurm "cluster" on this machine (munged + slurmctld + slurmd), for the
# tests and for trying the batch scripts without a cluster. Needs root (slurmd runs jobs
# as their owner) and Debian's slurm-wlm + munge (launch/install_deps.sh --test).
#
#   slurm/local-cluster.sh up   [BASE]   start; prints the SLURM_CONF line to export
#   slurm/local-cluster.sh down [BASE]   stop the daemons (by PID) and delete BASE
#
# Everything (munge key and socket, slurm.conf, state, spool, logs, pid files) lives under
# BASE (default /tmp/mirrored-slurm); nothing is written to /etc and no system service is
# touched, so it coexists with a real Slurm client configuration.
# Environment: CPUS (default: nproc; may exceed it, jobs then oversubscribe),
#   SLURMCTLD_PORT / SLURMD_PORT (default 6817 / 6818; tests pick free ones),
#   CRED_EXPIRE (default 5: seconds a requeued job is held; Slurm's default is 120).
set -euo pipefail
cmd=${1:-}
BASE=${2:-${BASE:-/tmp/mirrored-slurm}}
export SLURM_CONF="$BASE/slurm.conf"

# stop_pid FILE NAME: end the process whose PID FILE holds, waiting up to ~5 s before
# escalating; never touches anything but that PID.
stop_pid() {
  local file=$1 name=$2 pid
  [[ -f "$file" ]] || return 0
  pid=$(cat "$file")
  [[ "$pid" =~ ^[0-9]+$ ]] || { rm -f "$file"; return 0; }
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; fi
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$pid" 2>/dev/null; then echo "$name ($pid) ignored SIGTERM: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$file"
}

down() {
  [[ -d "$BASE" ]] || { echo "no local cluster under $BASE"; return 0; }
  if [[ -f "$SLURM_CONF" ]]; then
    timeout 10 scontrol shutdown >/dev/null 2>&1 || true  # slurmctld and every slurmd exit
  fi
  stop_pid "$BASE/slurmd.pid" slurmd
  stop_pid "$BASE/slurmctld.pid" slurmctld
  if [[ -f "$BASE/munge/munged.pid" ]]; then
    munged --stop --socket="$BASE/munge/munge.socket.2" >/dev/null 2>&1 || true
    stop_pid "$BASE/munge/munged.pid" munged
  fi
  rm -rf "$BASE"
  echo "local slurm under $BASE stopped"
}

up() {
  for tool in munged mungekey slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || { echo "$tool not found: install slurm-wlm and munge (launch/install_deps.sh --test)" >&2; exit 2; }
  done
  [[ $(id -u) -eq 0 ]] || { echo "slurm/local-cluster.sh needs root (slurmd runs jobs as their owner)" >&2; exit 2; }
  if [[ -f "$BASE/slurmctld.pid" ]] && kill -0 "$(cat "$BASE/slurmctld.pid")" 2>/dev/null; then
    echo "a local cluster is already running under $BASE" >&2; exit 2
  fi
  local host cpus mem_mb
  host=$(hostname -s)
  cpus=${CPUS:-$(nproc)}
  mem_mb=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 1024 ))
  mkdir -p "$BASE"/{munge,state,spool,log}
  chmod 0755 "$BASE" "$BASE/munge"
  # Whatever fails from here on leaves nothing running.
  trap 'echo "local-cluster.sh up failed; stopping what started" >&2; down >&2' ERR
  # munged refuses a socket whose directories are not searchable by everyone.
  local dir=$BASE
  while [[ "$dir" != / ]]; do
    dir=$(dirname "$dir")
    [[ $(( 0$(stat -c %a "$dir") & 1 )) -eq 1 ]] ||
      { echo "munged needs every directory above $BASE searchable by all (chmod o+x $dir)" >&2; rm -rf "$BASE"; exit 2; }
  done

  # munge: a private key and socket, so no system munged is needed or disturbed
  mungekey --create --keyfile="$BASE/munge/munge.key" --force
  chmod 0600 "$BASE/munge/munge.key"
  munged --key-file="$BASE/munge/munge.key" --socket="$BASE/munge/munge.socket.2" \
         --pid-file="$BASE/munge/munged.pid" --seed-file="$BASE/munge/munged.seed" \
         --log-file="$BASE/log/munged.log"
  munge -S "$BASE/munge/munge.socket.2" -n | unmunge -S "$BASE/munge/munge.socket.2" >/dev/null

  cat > "$SLURM_CONF" <<CONF
ClusterName=mirrored-local
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: how long slurmd refuses a requeued job's new credentials (and so how long
# Slurm holds a requeued job); 120 s by default, short here so requeue tests are quick.
AuthInfo=socket=${BASE}/munge/munge.socket.2,cred_expire=${CRED_EXPIRE:-5}
StateSaveLocation=${BASE}/state
SlurmdSpoolDir=${BASE}/spool
SlurmctldPidFile=${BASE}/slurmctld.daemon.pid
SlurmdPidFile=${BASE}/slurmd.daemon.pid
SlurmctldLogFile=${BASE}/log/slurmctld.log
SlurmdLogFile=${BASE}/log/slurmd.log
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
# no cgroups here: track processes by parentage, bind nothing
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
MailProg=/bin/true
# CPUs below may exceed the machine's cores (oversubscribed test jobs)
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
# finished jobs leave the queue after 5 s, and jobs get 5 s between SIGTERM and SIGKILL
MinJobAge=5
KillWait=5
Waittime=0
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

  # Foreground mode (-D), backgrounded here, so the PIDs are ours to stop.
  nohup slurmctld -D -i -f "$SLURM_CONF" >"$BASE/log/slurmctld.stdout" 2>&1 &
  echo $! >"$BASE/slurmctld.pid"
  nohup slurmd -D -f "$SLURM_CONF" >"$BASE/log/slurmd.stdout" 2>&1 &
  echo $! >"$BASE/slurmd.pid"

  for i in $(seq 1 60); do
    state=$(sinfo -h -N -o '%t' 2>/dev/null | head -1 || true)
    if [[ "$state" == "idle" ]]; then
      echo "local slurm up: node ${host} idle after $((i * 250)) ms, ${cpus} CPUs"
      echo "export SLURM_CONF=$SLURM_CONF"
      trap - ERR
      return 0
    fi
    sleep 0.25
  done
  echo "the node never became idle; logs:" >&2
  tail -n 20 "$BASE"/log/*.log >&2 || true
  down
  exit 1
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) echo "usage: slurm/local-cluster.sh up|down [BASE]" >&2; exit 2 ;;
esac
