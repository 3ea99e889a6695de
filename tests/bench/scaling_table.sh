#!/usr/bin/env bash
# Scaling table: samples/s of the same configuration at 1 replica and at each world size
# in RANKS, and the scaling efficiency (samples/s per replica relative to 1 replica), as a
# markdown table for docs/performance.md. Every figure comes from `mirrored bench train --scaling`,
# which times the N-replica run and then the 1-replica run of the same configuration in
# the same job, so each pair shares the machine's conditions; the table gives medians
# over REPEATS jobs.
#   tests/bench/scaling_table.sh [build/mirrored]
# Environment: MODELS ("mlp cnn resnet"; gpt runs launch/configs/shakespeare_gpt.ini),
# RANKS ("2 4"), REPEATS (3), and timed steps per model: STEPS_MLP (300), STEPS_CNN (40),
# STEPS_RESNET (10), STEPS_GPT (30). EXTRA: more bench options
# for every run (e.g. "--bind_cores off"). Default settings otherwise: threads = cores /
# ranks on the host, overlap = auto, bind_cores = auto.
# Needs data/fashion-mnist/*.h5 (launch/import_fmnist.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/mirrored}
models=${MODELS:-"mlp cnn resnet"}
ranks=${RANKS:-"2 4"}
repeats=${REPEATS:-3}
extra=${EXTRA:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cores=$(nproc)

steps_of() {
  case $1 in
    mlp) echo "${STEPS_MLP:-300}" ;;
    cnn) echo "${STEPS_CNN:-40}" ;;
    resnet) echo "${STEPS_RESNET:-10}" ;;
    gpt) echo "${STEPS_GPT:-30}" ;;
    *) echo 40 ;;
  esac
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# KEY=VALUE from the bench's own summary lines (they start a line; the 1-replica child's
# lines are echoed indented, after "  | ").
value() { sed -nE "s/^(|.* )$1=([0-9.]+).*/\2/p" | grep -v '^$' | tail -1; }

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A baseline speed efficiency
for model in $models; do
  config=launch/configs/fmnist_$model.ini
  [[ $model == gpt ]] && config=launch/configs/shakespeare_gpt.ini
  [[ -f $config ]] || { echo "no $config" >&2; exit 1; }
  for n in $ranks; do
    for ((r = 0; r < repeats; r++)); do
      out=$log/$model.$n.$r
      # shellcheck disable=SC2086
      launch/local.sh "$n" "$bin" bench train --config "$config" --steps "$(steps_of "$model")" --scaling $extra \
        >"$out" 2>&1 || { cat "$out" >&2; exit 1; }
      summary=$(grep '^scaling_efficiency=' "$out")
      baseline[$model]+="$(value baseline_samples_per_sec <<<"$summary") "
      speed[$model.$n]+="$(grep '^samples_per_sec=' "$out" | value samples_per_sec) "
      efficiency[$model.$n]+="$(value scaling_efficiency <<<"$summary") "
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(lscpu | sed -nE 's/^Model name: +//p' | head -1)
echo "CPU: $cpu, $cores cores ($(nproc --all) online); load average $load_before before, $load_after after."
echo "Medians over $repeats jobs of \`$bin bench train --config launch/configs/fmnist_MODEL.ini --scaling\`"
echo "under \`launch/local.sh N\` (steps: mlp $(steps_of mlp), cnn $(steps_of cnn), resnet $(steps_of resnet))${extra:+, with $extra}."
echo "Each cell: samples/s over all replicas, and in brackets the scaling efficiency"
echo "(samples/s per replica / samples/s of 1 replica, measured in the same job)."
echo
header="| model | 1 rank |"
rule="|---|---|"
for n in $ranks; do
  note=""
  ((n > cores)) && note=" (oversubscribed: $n ranks on $cores cores)"
  header+=" $n ranks$note |"
  rule+="---|"
done
echo "$header"
echo "$rule"
for model in $models; do
  row="| $model | $(tr ' ' '\n' <<<"${baseline[$model]}" | grep . | median | xargs printf '%.0f') |"
  for n in $ranks; do
    s=$(tr ' ' '\n' <<<"${speed[$model.$n]}" | grep . | median | xargs printf '%.0f')
    e=$(tr ' ' '\n' <<<"${efficiency[$model.$n]}" | grep . | median | xargs printf '%.2f')
    row+=" $s ($e) |"
  done
  echo "$row"
done
