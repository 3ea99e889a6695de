#!/usr/bin/env bash
# Builds tests/bench/poll_latency.cpp with mpicxx and runs it at NP ranks (2) under
# --bind-to none and --bind-to core: where an in-training all-reduce's time goes when
# ranks wait by spinning, by MPI_Wait or by polling with sleeps.
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
  echo "--bind-to $bind"
  mpirun "${flags[@]}" --bind-to "$bind" "$out/poll_latency"
done
