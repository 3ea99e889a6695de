# shellcheck shell=bash
# Helpers for tests that run on a cluster of network-namespace hosts (tests/netns/).
# Source after lib.sh. Skips (exit 77) with the reason when namespaces cannot be made.
NETNS=$SOURCE_DIR/tests/netns/cluster.sh
export NETNS_PREFIX="mt$$"   # unique per test run: concurrent runs never share hosts
NETNS_HOSTS=0

require_netns() {
  [[ $(id -u) -eq 0 ]] || { echo "SKIP: network namespaces need root"; exit 77; }
  command -v ip >/dev/null || { echo "SKIP: iproute2 (ip) not installed"; exit 77; }
  local reason
  reason=$("$NETNS" probe 2>&1) || { echo "SKIP: cannot create network namespaces: $reason"; exit 77; }
}

# netns_up N [RATE]: hosts h1..hN, torn down when the script exits (with WORK).
netns_up() {
  NETNS_HOSTS=$1
  trap 'end_jobs; netns_down; rm -rf "$WORK"' EXIT
  "$NETNS" up "$@" >/dev/null
}

netns_down() {
  if ((NETNS_HOSTS > 0)); then "$NETNS" down "$NETNS_HOSTS"; fi
  NETNS_HOSTS=0
}

# on_hosts NHOSTS PPN ARGS...: mirrored ARGS on NHOSTS hosts x PPN ranks, ended after 240 s.
on_hosts() {
  on_hosts_np "$1" "$2" $(($1 * $2)) "${@:3}"
}

# on_hosts_np NHOSTS SLOTS NP ARGS...: mirrored ARGS through launch/multinode.sh on NHOSTS hosts
# of SLOTS slots each, NP ranks that train (multinode.sh adds shrink.spares' spares on the
# hostfile's last hosts), ended after 240 s.
on_hosts_np() {
  local nhosts=$1 slots=$2 np=$3; shift 3
  timeout -k 5 240 "$NETNS" mpirun "$nhosts" "$slots" "$np" "$MIRRORED" "$@"
}

# host_pids NS [COMM]: the processes in namespace NS (only those named COMM).
host_pids() {
  local pid
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    if [[ -z "${2:-}" || "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$2" ]]; then echo "$pid"; fi
  done
}

# host_ranks NS: mirrored's rank processes in namespace NS (not the rank agents that started
# them: `mirrored rank-agent ...`).
host_ranks() {
  local pid
  for pid in $(host_pids "$1" mirrored); do
    [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" == *" rank-agent "* ]] || echo "$pid"
  done
}

# nothing_left_on_hosts WHAT: no process left in any host of netns_up within 10 s (of the
# job's end); fail naming WHAT and what is left (pid:name) otherwise.
nothing_left_on_hosts() {
  local left h
  for _ in $(seq 100); do
    left=$(for ((h = 1; h <= NETNS_HOSTS; ++h)); do host_pids "${NETNS_PREFIX}h$h"; done)
    [[ -z "${left//[[:space:]]/}" ]] && return 0
    sleep 0.1
  done
  fail "$1: processes left running: $(for p in $left; do echo -n "$p:$(cat "/proc/$p/comm" 2>/dev/null) "; done)"
}
