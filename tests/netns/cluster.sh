#!/usr/bin/env bash
# A cluster of N hosts on this machine, each host a network namespace with its own
# address (10.77.0.K) on a private bridge, for multi-node mpirun tests over real TCP.
#
#   tests/netns/cluster.sh up N [RATE]     hosts h1..hN; RATE (e.g. 1gbit) adds a tbf
#                                          limit on every host's link
#   tests/netns/cluster.sh down N          delete them (ends what still runs inside)
#   tests/netns/cluster.sh mpirun N PPN ARGS...
#                                          launch/multinode.sh inside h1 with a hostfile
#                                          of N hosts x PPN slots (ARGS: NP PROGRAM ...)
#
# Needs root (ip netns). NETNS_PREFIX (default "mirrored") names the namespaces
# (PREFIXsw, PREFIXh1..), so concurrent test runs do not collide. Nothing is added to the
# root namespace: both ends of every veth are created inside namespaces, and the hosts
# have no route out, so no traffic leaves them. mpirun itself runs inside h1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export NETNS_PREFIX=${NETNS_PREFIX:-mirrored}
P=$NETNS_PREFIX
cmd=${1:-}; shift || true

up() {
  local n=$1 rate=${2:-}
  ip netns add "${P}sw"
  ip -n "${P}sw" link set lo up
  ip -n "${P}sw" link add br0 type bridge
  ip -n "${P}sw" link set br0 up
  for k in $(seq 1 "$n"); do
    ip netns add "${P}h$k"
    ip -n "${P}sw" link add "p$k" type veth peer name eth0 netns "${P}h$k"
    ip -n "${P}sw" link set "p$k" master br0
    ip -n "${P}sw" link set "p$k" up
    ip -n "${P}h$k" addr add "10.77.0.$k/24" dev eth0
    ip -n "${P}h$k" link set lo up
    ip -n "${P}h$k" link set eth0 up
    if [[ -n "$rate" ]]; then
      # Egress shaping on each host: every byte a host sends passes its own limit, as on a
      # switched network with one link per node.
      ip netns exec "${P}h$k" tc qdisc add dev eth0 root tbf rate "$rate" burst 128kb latency 50ms
    fi
  done
  echo "netns cluster up: ${P}h1..${P}h$n at 10.77.0.1..$n${rate:+, tbf $rate}"
}

down() {
  local n=$1 ns pids
  for k in $(seq 1 "$n") sw; do
    ns=${P}h$k; [[ $k == sw ]] && ns=${P}sw
    [[ -e /run/netns/$ns ]] || continue
    # Whatever still runs inside was started by the test (ranks, orted): end it by PID.
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n "$pids" ]]; then
      kill -TERM $pids 2>/dev/null || true
      sleep 0.5
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [[ -z "$pids" ]] || kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns"
  done
}

run_mpirun() {
  local nhosts=$1 ppn=$2; shift 2
  local hostfile
  hostfile=$(mktemp "${TMPDIR:-/tmp}/mirrored-hosts.XXXXXX")
  for k in $(seq 1 "$nhosts"); do echo "10.77.0.$k slots=$ppn"; done >"$hostfile"
  local status=0
  # The hosts share this machine's cores: with more ranks in all than cores, waiting ranks
  # yield (launch/mpi_env.sh, mirrored_yield_when_oversubscribed), unless the caller set it.
  if [[ -z "${OMPI_MCA_mpi_yield_when_idle:-}" ]] && ((nhosts * ppn > $(nproc))); then
    export OMPI_MCA_mpi_yield_when_idle=1
  fi
  MIRRORED_RSH_AGENT="$HERE/nsrsh" MIRRORED_NET=10.77.0.0/24 \
    ip netns exec "${P}h1" unshare --uts sh -c 'hostname "$0" && exec "$@"' "${P}-h1" \
    "$ROOT/launch/multinode.sh" "$hostfile" "$@" || status=$?
  rm -f "$hostfile"
  return $status
}

# Can this process create namespaces at all? (CI runs as root; containers may forbid it.)
probe() {
  local name="${P}probe$$"
  if ! out=$(ip netns add "$name" 2>&1); then echo "ip netns add failed: $out"; return 1; fi
  ip netns del "$name"
}

case "$cmd" in
  up) up "$@" ;;
  down) down "$@" ;;
  mpirun) run_mpirun "$@" ;;
  probe) probe ;;
  *) echo "usage: tests/netns/cluster.sh up N [RATE] | down N | mpirun NHOSTS PPN NP PROGRAM [ARGS...] | probe" >&2; exit 2 ;;
esac
