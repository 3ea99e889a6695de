#!/usr/bin/env bash
# The cost of reduction = invariant: `fast` and `invariant` of the same configuration in
# separate jobs, interleaved (every round runs each model, world size, reduction and binary
# once, in that order), then medians over the rounds and the invariant / fast ratios, as
# markdown rows for docs/performance.md. Each figure is `mirrored bench train`'s CPU
# time/step/rank (user + system time of every thread, mean over ranks: on a shared host
# it moves by a few percent where wall time swings by 2x) and its ms/step (wall).
#   tests/bench/invariant_cost.sh [BINARY...]      (default build/mirrored)
# Several binaries (a tree before and after a change) are interleaved in the same rounds.
# Environment: ROUNDS (3), MODELS ("gpt mlp"), RANKS ("1 2 4"), STEPS_GPT (30),
# STEPS_MLP (150), OPENBLAS_CORETYPE (SkylakeX: give every side the same BLAS kernel),
# LOG (the raw bench output of every job, appended; default a fresh file in /tmp).
# Needs data/fashion-mnist/*.h5 and data/shakespeare/train.h5 (launch/import_*.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
bins=("$@")
((${#bins[@]})) || bins=(build/mirrored)
rounds=${ROUNDS:-3}
models=${MODELS:-"gpt mlp"}
ranks=${RANKS:-"1 2 4"}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=${LOG:-$(mktemp /tmp/invariant_cost.XXXXXX)}
results=$(mktemp /tmp/invariant_cost_results.XXXXXX)
trap 'rm -f "$results"' EXIT

config_of() {
  case $1 in
    gpt) echo "--config launch/configs/shakespeare_gpt.ini --steps ${STEPS_GPT:-30}" ;;
    mlp) echo "--config launch/configs/fmnist_mlp.ini --steps ${STEPS_MLP:-150}" ;;
    *) echo "invariant_cost.sh: unknown model '$1' (gpt or mlp)" >&2; exit 2 ;;
  esac
}

for round in $(seq "$rounds"); do
  for model in $models; do
    for n in $ranks; do
      for reduction in fast invariant; do
        for bin in "${bins[@]}"; do
          # shellcheck disable=SC2046
          output=$(launch/local.sh "$n" "$bin" bench train $(config_of "$model") --threads 1 --warmup 5 \
                     --reduction "$reduction" 2>&1) || { echo "$output" >&2; exit 1; }
          printf '### %s %s %s ranks %s round %s\n%s\n' "$bin" "$model" "$n" "$reduction" "$round" "$output" >>"$log"
          cpu=$(sed -n 's/.*CPU time\/step\/rank: \([0-9.]*\) ms.*/\1/p' <<<"$output")
          wall=$(sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p' <<<"$output")
          echo "$bin $model $n $reduction $cpu $wall" | tee -a "$results" >&2
        done
      done
    done
  done
done
echo "raw output: $log" >&2

# Medians per binary, model, ranks and reduction; then the ratio invariant / fast.
python3 - "$results" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    bin_, model, n, reduction, cpu, wall = line.split()
    runs.setdefault((bin_, model, int(n), reduction), []).append((float(cpu), float(wall)))
print("| binary | model, ranks | fast / invariant CPU ms/step (median) | ratio | fast / invariant wall ms/step | ratio |")
print("|---|---|---|---|---|---|")
for (bin_, model, n, reduction) in sorted(runs):
    if reduction != "fast" or (bin_, model, n, "invariant") not in runs:
        continue
    fast, inv = runs[(bin_, model, n, "fast")], runs[(bin_, model, n, "invariant")]
    fc, ic = statistics.median(c for c, _ in fast), statistics.median(c for c, _ in inv)
    fw, iw = statistics.median(w for _, w in fast), statistics.median(w for _, w in inv)
    print(f"| {bin_} | {model}, {n} | {fc:.2f} / {ic:.2f} | {ic / fc:.2f} | {fw:.2f} / {iw:.2f} | {iw / fw:.2f} |")
EOF
