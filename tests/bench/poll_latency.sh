#!/usr/bin/env bash
# Builds tests/bench/poll_latency.cpp with mpicxx and runs it at NP ranks (2) under
# --bind-to none and --bind-to core, with Open MPI's default nonblocking all-reduce
# algorithm (libnbc picks binomial, a reduce then a broadcast, for in-place buffers or
# fewer than 4 ranks) and with ring and recursive doubling: where an in-training
# all-reduce's time goes when ranks wait by spinning, by MPI_Wait or by polling with
# sleeps, and what the algorithm costs.
#   tests/bench/poll_latency.sh [NP]
set -euo pipefail
cd "$(dirname "$0")"
np=${1:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicxx -O2 -std=c++17 poll_latency.cpp -o "$out/poll_latency"
flags=(-np "$np")
if [[ $(id -u) -eq 0 ]]; then flags+=(--allow-run-as-root); fi
if ((np > $(nproc))); then flags+=(--oversubscribe); fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for bind in none core; do
  for algorithm in ignore ring recursive_doubling; do
    echo "--bind-to $bind, coll_libnbc_iallreduce_algorithm = $algorithm"
    OMPI_MCA_coll_libnbc_iallreduce_algorithm=$algorithm mpirun "${flags[@]}" --bind-to "$bind" "$out/poll_latency"
  done
done
