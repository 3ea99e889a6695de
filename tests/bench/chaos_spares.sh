#!/usr/bin/env bash
# Chaos benchmark for hot spares (shrink.spares): on network-namespace hosts (tests/netns/),
# 2 hosts x 2 ranks train and a third host's 2 ranks are spares (a spare node); a random
# training rank is killed (kill -9) every INTERVAL seconds, twice (once per spare). The run
# must finish at world 4 with final.h5 bit-identical to the uninterrupted run
# (reduction = invariant, allreduce = flat). MODEL=mlp (the default: sgd mlp on
# Fashion-MNIST, short steps, so a 10 s interval spans hundreds of them) or gpt (the
# Shakespeare recipe). Prints, with the commands:
#   - each loss: the kill's time, the victim, and the time from the kill to the membership
#     record (written when the first step after the recovery completes), and recovery_s
#     (from the failure's detection to that step);
#   - goodput: the uninterrupted run's wall time / the chaos run's wall time (same steps;
#     the uninterrupted run is launched the same way, on the 3 hosts with the spares);
#   - where each recovery's time went (--verbose: the chief's "recovery:" lines), the median
#     samples/s between losses in both runs, and the time from the last record to the exit;
#   - OMPI_MCA_mpi_yield_when_idle as the ranks get it: tests/netns/cluster.sh sets it to 1
#     (waiting ranks yield the core) when the hosts' ranks outnumber this machine's cores,
#     unless set; run with OMPI_MCA_mpi_yield_when_idle=0 to see Open MPI's spinning;
#   - the cost of spares when nothing fails: the same run on 4 local ranks with and without
#     2 spares, NOFAIL_REPEATS times each, interleaved (median step time).
# Needs root (namespaces), the data (launch/import_fmnist.sh, or for gpt
# launch/import_shakespeare.sh) and a build with ULFM. Not a ctest: it runs minutes.
#   tests/bench/chaos_spares.sh [build/mirrored]
# Other processes on the machine change every figure: the load average is printed at the
# start and the end.
# Environment: MODEL (mlp), STEPS (mlp 3000, gpt 200), INTERVAL (10), NOFAIL_REPEATS (3),
# NOFAIL_STEPS (mlp 1000, gpt 100; NOFAIL_REPEATS=0 skips that part), DATA (data/fashion-mnist),
# CORPUS (data/shakespeare), TMPDIR, OMPI_MCA_mpi_yield_when_idle (see above), BIND_CORES
# (auto; see below), ALLREDUCE (flat; or hierarchical, which reduces on each host first:
# with reduction = invariant the bits are the same).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
bin=$(realpath "${1:-build/mirrored}")
model=${MODEL:-mlp}
if [[ "$model" == gpt ]]; then default_steps=200 default_nofail=100; else default_steps=3000 default_nofail=1000; fi
steps=${STEPS:-$default_steps} interval=${INTERVAL:-10} spares=2 repeats=${NOFAIL_REPEATS:-3}
nofail_steps=${NOFAIL_STEPS:-$default_nofail}
[[ $(id -u) -eq 0 ]] || { echo "chaos_spares: needs root (network namespaces)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NETNS_PREFIX="cb$$"
NETNS=$ROOT/tests/netns/cluster.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-chaos.XXXXXX")
trap '"$NETNS" down 3 >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$NETNS" up 3 >/dev/null
# BIND_CORES (bind_cores, default auto): every namespace host binds its ranks by local rank
# to the same 2 cores, so a spare (local rank 0 on h3) that takes the place of a rank bound
# to core 1 leaves 3 training ranks on core 0 and 1 on core 1 until the next loss; on real
# hosts each has cores of its own. BIND_CORES=off takes that out of the comparison.
common=(--checkpoint.every_steps 0 --reduction invariant --threads 1 --progress plain --on_failure shrink
        --allreduce "${ALLREDUCE:-flat}" --verbose --bind_cores "${BIND_CORES:-auto}")
case "$model" in
  gpt)
    corpus=$(realpath "${CORPUS:-data/shakespeare}")
    [[ -s "$corpus/train.h5" ]] || { echo "chaos_spares: no corpus in $corpus (launch/import_shakespeare.sh)" >&2; exit 2; }
    recipe=(train --config launch/configs/shakespeare_gpt.ini --data.train "$corpus/train.h5"
            --data.test "$corpus/val.h5" --eval_windows 60 --log_every 10 "${common[@]}")
    until_step() { echo --max_steps "$1" --eval_every "$1"; } ;;
  mlp)
    data=$(realpath "${DATA:-data/fashion-mnist}")
    [[ -s "$data/train.h5" ]] || { echo "chaos_spares: no Fashion-MNIST in $data (launch/import_fmnist.sh)" >&2; exit 2; }
    recipe=(train --data.train "$data/train.h5" --data.test "$data/test.h5" --batch_size 128 --model.hidden 256,128
            --lr 0.05 --momentum 0.9 --seed 5 --log_every 50 --checkpoint.every_epochs 0 "${common[@]}")
    until_step() { echo --max_steps "$1" --epochs 100; } ;;
  *) echo "chaos_spares: MODEL='$model': expected mlp or gpt" >&2; exit 2 ;;
esac
# shellcheck disable=SC2207  # until_step prints flags
run_args=("${recipe[@]}" $(until_step "$steps"))
slots=2  # per host: h1 and h2 train, h3's two ranks are the spares
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

echo "CPU: $(lscpu | sed -nE 's/^Model name: +//p' | head -1), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) at start."
echo "$model (reduction = invariant, allreduce = ${ALLREDUCE:-flat}), $steps steps, on namespace hosts: 2 x 2 training ranks,"
echo "h3 with $spares spare(s); one random training rank killed every $interval s, $spares time(s)."
if [[ -n "${OMPI_MCA_mpi_yield_when_idle:-}" ]]; then
  yield="$OMPI_MCA_mpi_yield_when_idle (set by the caller)"
elif ((3 * slots > $(nproc))); then
  yield="1 (tests/netns/cluster.sh: $((3 * slots)) ranks on $(nproc) cores)"
else
  yield="Open MPI's default (0: spin)"
fi
echo "OMPI_MCA_mpi_yield_when_idle: $yield"
echo

t0=$(now)
"$NETNS" mpirun 3 "$slots" 4 "$bin" "${run_args[@]}" --shrink.spares "$spares" --out "$work/full" >"$work/full.log" 2>&1 ||
  { cat "$work/full.log"; echo "uninterrupted run failed" >&2; exit 1; }
full_s=$(seconds "$t0" "$(now)")
full_tail=$(seconds "$(date +%s.%N -r "$work/full/metrics.jsonl")" "$(now)")
echo "uninterrupted: $full_s s   ($NETNS mpirun 3 $slots 4 $bin ${run_args[*]} --shrink.spares $spares --out DIR)"

out=$work/chaos
t0=$(now)
"$NETNS" mpirun 3 "$slots" 4 "$bin" "${run_args[@]}" --shrink.spares "$spares" --out "$out" >"$out.log" 2>&1 &
job=$!
for _ in $(seq 2400); do grep -q '"kind": "train"' "$out/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
declare -a kill_at=() victims=() seen_at=() at_step=()
# last_train_step OUT: the step of the newest train record (where the run was at a kill).
last_train_step() { grep -o '"kind": "train", "step": [0-9]*' "$1/metrics.jsonl" | tail -1 | grep -o '[0-9]*$' || echo 0; }
for ((k = 0; k < spares; k++)); do
  sleep "$interval"
  kill -0 "$job" 2>/dev/null || break
  # The training ranks now: ranks.jsonl is rewritten by each world.
  mapfile -t pids < <(sed -nE 's/.*"rank": ([0-9]+), "host": "([^"]*)", "pid": ([0-9]+),.*/\1 \2 \3/p' "$out/ranks.jsonl")
  pick=${pids[$((RANDOM % ${#pids[@]}))]}
  read -r rank host pid <<<"$pick"
  records=$(grep -c '"kind": "membership"' "$out/metrics.jsonl" || true)
  kill_at[k]=$(now)
  kill -9 "$pid" 2>/dev/null || { echo "rank $rank (pid $pid) already gone" >&2; }
  victims[k]="rank $rank on $host"
  at_step[k]=$(last_train_step "$out")
  # Until the membership record of this loss (the first step after its recovery completed, or
  # the run's end when no step was left), at most 60 s; never past the job's end, whose wall
  # time is what goodput counts.
  deadline=$((SECONDS + 60))
  until (($(grep -c '"kind": "membership"' "$out/metrics.jsonl" || true) > records)); do
    if ! kill -0 "$job" 2>/dev/null || ((SECONDS >= deadline)); then break; fi
    sleep 0.01
  done
  seen_at[k]=$(now)
done
status=0
wait "$job" || status=$?
chaos_s=$(seconds "$t0" "$(now)")
chaos_tail=$(seconds "$(date +%s.%N -r "$out/metrics.jsonl")" "$(now)")
((status == 0)) || { tail -30 "$out.log"; echo "the chaos run exited $status" >&2; exit 1; }
echo "with faults:   $chaos_s s   (the same command)"
echo
echo "| loss | killed | after step | kill to next completed step (s) | recovery_s (detection to that step) |"
echo "|---|---|---|---|---|"
mapfile -t recoveries < <(grep '"kind": "membership"' "$out/metrics.jsonl" | sed -E 's/.*"recovery_s": ([0-9.]+).*/\1/')
for ((k = 0; k < ${#kill_at[@]}; k++)); do
  echo "| $((k + 1)) | ${victims[k]} | ${at_step[k]} | $(seconds "${kill_at[k]}" "${seen_at[k]}") | ${recoveries[k]:-no record} |"
done
echo
grep '"kind": "membership"' "$out/metrics.jsonl" || echo "(no membership record: the run ended before a loss)"
echo
echo "where each recovery's time went (the chief's --verbose lines; seconds from the failure's detection):"
grep -a -E 'recovery: ' "$out.log" | awk '!seen[$0]++ { print "  " $0 }' | grep . || echo "  (none)"
# samples_per_sec_median OUT FIRST LAST: the median samples/s of the train records of steps
# FIRST..LAST (the speed of training between losses).
samples_per_sec_median() {
  grep '"kind": "train"' "$1/metrics.jsonl" |
    sed -nE 's/.*"step": ([0-9]+),.*"samples_per_sec": ([0-9.]+).*/\1 \2/p' |
    awk -v a="$2" -v b="$3" '$1 > a && $1 <= b { print $2 }' | median
}
mapfile -t record_steps < <(grep '"kind": "membership"' "$out/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+),.*/\1/' || true)
bounds=(0 "${record_steps[@]}" "$steps")
speeds="" faultfree=""
for ((k = 0; k + 1 < ${#bounds[@]}; k++)); do
  speeds+="$(samples_per_sec_median "$out" "${bounds[k]}" "${bounds[k + 1]}") "
  faultfree+="$(samples_per_sec_median "$work/full" "${bounds[k]}" "${bounds[k + 1]}") "
done
echo "median samples/s between losses (steps ${bounds[*]}): with faults [ ${speeds}], uninterrupted [ ${faultfree}]"
echo "from the last record of metrics.jsonl to the job's exit (MPI_Finalize, the launcher):" \
     "uninterrupted $full_tail s, with faults $chaos_tail s"
world=$(grep '"kind": "train"' "$out/metrics.jsonl" | tail -1 | sed -E 's/.*"world_size": ([0-9]+).*/\1/')
identical=no
build/tests/compare_params "$work/full/final.h5" "$out/final.h5" --exact >/dev/null 2>&1 && identical=yes
echo
echo "final world size: $world; final.h5 bit-identical to the uninterrupted run: $identical"
echo "goodput (uninterrupted wall time / wall time with faults): $(awk -v a="$full_s" -v b="$chaos_s" 'BEGIN { printf "%.3f", a / b }')"
verdict=0
[[ "$world" == 4 && "$identical" == yes ]] || { echo "chaos_spares: FAILED (world $world, bit-identical $identical)" >&2; verdict=1; }

echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
((repeats > 0)) || exit $verdict

# No failure: the cost of waiting spares, on local ranks (interleaved runs, median ms/step).
echo
echo "no failure, 4 local ranks, $model, $nofail_steps steps, $repeats runs each (interleaved):"
base="" with=""
for ((r = 0; r < repeats; r++)); do
  for k in 0 "$spares"; do
    rm -rf "$work/nofail"
    t=$(now)
    # shellcheck disable=SC2046
    launch/local.sh 4 "$bin" "${recipe[@]}" $(until_step "$nofail_steps") \
      --shrink.spares "$k" --out "$work/nofail" >"$work/nofail.log" 2>&1 ||
      { tail -20 "$work/nofail.log"; echo "no-failure run failed" >&2; exit 1; }
    ms=$(awk -v a="$t" -v b="$(now)" -v n="$nofail_steps" 'BEGIN { printf "%.1f", (b - a) * 1000 / n }')
    if ((k == 0)); then base+="$ms "; else with+="$ms "; fi
  done
done
b=$(tr ' ' '\n' <<<"$base" | grep . | median) w=$(tr ' ' '\n' <<<"$with" | grep . | median)
echo "wall ms/step (start-up included): without spares $b [$base], with $spares spare(s) $w [$with]; ratio $(awk -v a="$w" -v b="$b" 'BEGIN { printf "%.3f", a / b }')"
echo "(launch/local.sh 4 $bin ${recipe[*]} $(until_step "$nofail_steps") --shrink.spares K --out DIR)"
exit $verdict
