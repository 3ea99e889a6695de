#!/usr/bin/env bash
# Where the in-training gradient all-reduce time goes, per overlap mode and core binding:
# runs `mirrored bench train` at NP ranks (2) for each combination, REPEATS times (3),
# and prints a markdown table of medians: samples/s, the all-reduce phase, and the
# communication table (comm, peer-wait, in-collective, copies, exposed; ms per step).
#   tests/bench/comm_breakdown.sh [build/mirrored]
# Environment: MODEL (mlp), NP (2), STEPS (300), REPEATS (3), OVERLAPS ("inline thread
# off"), BINDS ("auto off").
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/mirrored}
model=${MODEL:-mlp} np=${NP:-2} steps=${STEPS:-300} repeats=${REPEATS:-3}
overlaps=${OVERLAPS:-"inline thread off"} binds=${BINDS:-"auto off"}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "CPU: $(lscpu | sed -nE 's/^Model name: +//p' | head -1), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) at start."
echo "$model, $np ranks, $steps timed steps, medians over $repeats runs of"
echo "\`launch/local.sh $np $bin bench train --config launch/configs/fmnist_$model.ini --overlap O --bind_cores B\`; ms per step."
echo
echo "| overlap | bind_cores | samples/s | all-reduce phase | comm | peer-wait | in-collective | copies | exposed |"
echo "|---|---|---|---|---|---|---|---|---|"
for overlap in $overlaps; do
  for bind in $binds; do
    declare -a cols=()
    for ((i = 0; i < 8; i++)); do cols[i]=""; done
    for ((r = 0; r < repeats; r++)); do
      launch/local.sh "$np" "$bin" bench train --config "launch/configs/fmnist_$model.ini" --steps "$steps" \
        --overlap "$overlap" --bind_cores "$bind" >"$out" 2>&1 || { cat "$out" >&2; exit 1; }
      # The phase row (after the phase header) and the communication row (after its header).
      read -r -a phases < <(grep -A1 'phases in ms/step' "$out" | tail -1)
      read -r -a comm < <(grep -A1 'gradient buckets, ms/step' "$out" | tail -1)
      cols[0]+="${phases[1]} "; cols[1]+="${phases[5]} "
      for ((i = 0; i < 5; i++)); do cols[i + 2]+="${comm[i]} "; done
    done
    row="| $overlap | $bind |"
    for ((i = 0; i < 7; i++)); do row+=" $(tr ' ' '\n' <<<"${cols[i]}" | grep . | median) |"; done
    echo "$row"
  done
done
