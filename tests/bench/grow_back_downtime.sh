#!/usr/bin/env bash
# The downtime of growing back (docs/checkpoints-and-failures.md#growing-back), beside the
# cost of starting the same job from nothing: REPEATS (3) runs of launch/local.sh NP (4)
# ranks, the fmnist mlp, reduction = invariant, on_failure = shrink; rank 2 killed after
# step 10, then `mirrored resize`. Per run: the downtime the relaunched chief records (end of
# the last step before to the end of the first step after) and its parts, from time-stamped
# output: stop (the resize checkpoint written, every rank gone: up to the script's relaunch
# line), start (relaunch line to the "resuming from" line: mpirun, MPI start-up with ULFM,
# the rank agents, the data sets, the checkpoint's load and broadcast) and first step (that
# line to the first step's end). The baseline is a fresh launch's start (script start to its
# "mirrored train:" line, printed as training begins: the same work but the checkpoint). Each grown run's final.h5 is compared with an
# uninterrupted run's (bit for bit expected).
#   tests/bench/grow_back_downtime.sh [build/mirrored]
# Environment: NP (4), REPEATS (3), STEPS (300), DATA_DIR (data/fashion-mnist).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/mirrored}
np=${NP:-4} repeats=${REPEATS:-3} steps=${STEPS:-300} data=${DATA_DIR:-data/fashion-mnist}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(train --data.train "$data/train.h5" --data.test "$data/test.h5" --batch_size 128 --epochs 1 --max_steps "$steps"
      --model.hidden 256,128 --lr 0.05 --momentum 0.9 --seed 5 --threads 1 --log_every 5 --checkpoint.every_epochs 0
      --progress plain --reduction invariant --on_failure shrink)
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
# at LOG PATTERN [last]: the time stamp of the first (or last) line of LOG matching PATTERN.
at() { grep -E -- "$2" "$1" | if [[ "${3:-}" == last ]]; then tail -1; else head -1; fi | cut -d' ' -f1; }
wait_for() { for _ in $(seq 1200); do grep -Eq -- "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

echo "CPU: $(lscpu | sed -nE 's/^Model name: +//p' | head -1), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) at start."
echo "launch/local.sh $np $bin ${args[*]} --out OUT; rank 2 killed after step 10, then mirrored resize OUT"
begin=$(date +%s.%N)
launch/local.sh "$np" "$bin" "${args[@]}" --out "$work/full" 2>&1 | stamp >"$work/full.log"
fresh=$(awk -v a="$begin" -v b="$(at "$work/full.log" '^[0-9.]+ mirrored train:')" 'BEGIN { printf "%.2f", b - a }')
echo "fresh launch, start to 'mirrored train:': $fresh s (the baseline: starting the job from nothing)"
printf '| run | downtime s | stop s | start s | first step s | final.h5 |\n|---|---|---|---|---|---|\n'
for run in $(seq "$repeats"); do
  out=$work/grown$run
  launch/local.sh "$np" "$bin" "${args[@]}" --out "$out" 2>&1 | stamp >"$out.log" &
  job=$!
  wait_for "$out/metrics.jsonl" '"kind": "train", "step": 10,' || { echo "run $run: no step 10" >&2; exit 1; }
  for pid in $(pgrep -f -- "--out $out( |$)"); do
    grep -qz '^MIRRORED_RANK_AGENT_FD=' "/proc/$pid/environ" 2>/dev/null || continue
    if grep -qzE '^(PMIX_RANK|OMPI_COMM_WORLD_RANK)=2$' "/proc/$pid/environ"; then kill -9 "$pid"; fi
  done
  wait_for "$out/metrics.jsonl" '"kind": "membership"' || { echo "run $run: no shrink" >&2; exit 1; }
  "$bin" resize "$out" >/dev/null
  wait "$job"
  stopped=$(grep '"kind": "resize"' "$out/metrics.jsonl" | sed -E 's/.*"time_ms": ([0-9]+).*/\1/')
  same=$("${COMPARE:-build/tests/compare_params}" "$work/full/final.h5" "$out/final.h5" --exact >/dev/null 2>&1 &&
         echo bit-identical || echo DIFFERENT)
  awk -v run="$run" -v t0="$stopped" -v relaunch="$(at "$out.log" 'relaunching it at its configured size')" \
      -v started="$(at "$out.log" 'resuming from' last)" -v grown="$(at "$out.log" 'grown back from')" \
      -v down="$(grep -o '"downtime_s": [0-9.e+-]*' "$out/metrics.jsonl" | cut -d' ' -f2)" -v same="$same" \
      'BEGIN { t0 /= 1000; printf "| %d | %.2f | %.2f | %.2f | %.2f | %s |\n", run, down, relaunch - t0, started - relaunch, grown - started, same }'
done
