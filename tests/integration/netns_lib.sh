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
  trap 'netns_down; rm -rf "$WORK"' EXIT
  "$NETNS" up "$@" >/dev/null
}

netns_down() {
  if ((NETNS_HOSTS > 0)); then "$NETNS" down "$NETNS_HOSTS"; fi
  NETNS_HOSTS=0
}

# on_hosts NHOSTS PPN ARGS...: mirrored ARGS on NHOSTS hosts x PPN ranks, under a timeout.
on_hosts() {
  local nhosts=$1 ppn=$2; shift 2
  timeout -k 5 240 "$NETNS" mpirun "$nhosts" "$ppn" $((nhosts * ppn)) "$MIRRORED" "$@"
}
