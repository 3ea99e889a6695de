#!/usr/bin/env bash
# Hot spares (shrink.spares, on_failure = shrink, Open MPI 5 with ULFM) on local ranks; each
# job is compared with an uninterrupted 4-rank run without spares:
#   1. sgd mlp, fast reduction, flat all-reduce, 4 ranks + 2 spares: spare 5 killed after
#      step 150 (recorded in spares_lost, nothing else), then rank 2 killed once training
#      goes on after that record (the
#      lowest spare takes its place): the job finishes at world 4, final.h5 bit-identical;
#      `mirrored info --ranks` shows the replacement; the waiting spare used under 2% of a
#      core (its threads' run time in /proc/PID/task/*/schedstat from step 5 to step 150);
#   2. sgd mlp, 4 + 1: rank 2 killed (replaced), then the spare that took its place killed
#      with no spare left (a shrink to 3 at step S): a record of each; final.h5 bit-identical
#      to an uninterrupted 4-rank run to step S continued from its checkpoint on 3 ranks with
#      the batch's uneven shares (train_as_shrunk);
#   3. the gpt recipe with reduction = invariant and its adamw state sharded (grad_clip = 1
#      as in the recipe), 4 ranks + 3 spares: the chief killed after step 5, a worker killed
#      after step 10, another stopped (SIGSTOP) after step 15; each replaced in turn (every
#      rank owns a shard and keeps the copy of another: the spare receives both), the job
#      finishes at world 4, final.h5 bit-identical to the uninterrupted unsharded run, three
#      membership records naming the replacements, the stopped process ended (skipped
#      when the Shakespeare corpus is not imported);
#   4. (run before 3) sgd mlp, invariant, 4 + 1: rank 2 killed after the last step (in the
#      final evaluation): replaced, the membership record written at the run's end,
#      bit-identical.
source "$(dirname "$0")/lib.sh"
require_data
require_ulfm
start=$SECONDS
mlp=("${FMNIST_MLP_ARGS[@]}" --allreduce flat --on_failure shrink)
# finished OUT JOB: the job JOB (writing OUT) exited 0 at world size WORLD.
finished() {
  local out=$1 job=$2 world=$3 status=0
  wait "$job" || status=$?
  ((status == 0)) || { cat "$out.log"; fail "$out: the job exited $status"; }
  last_world_size "$out" "$world"
  no_leftovers "$out"
}
# cpu_ns PID: the CPU time of every thread of PID in ns, from the scheduler's own account
# (/proc/PID/task/*/schedstat, exact), or from clock ticks of 10 ms (/proc/PID/stat) where a
# kernel keeps no schedstat: a tick is charged to whoever runs when the timer fires, so over
# a window of a few hundred ms one tick alone reads as several percent of a core.
cpu_ns() {
  local files=(/proc/"$1"/task/*/schedstat)
  if [[ -r ${files[0]} ]]; then
    cat "${files[@]}" 2>/dev/null | awk '{ns += $1} END {print ns + 0}'
  else
    awk '{print ($14 + $15) * 10000000}' "/proc/$1/stat" 2>/dev/null || echo 0
  fi
}

# 1. fast, flat: a spare lost, then a worker replaced.
ft_run 4 "${mlp[@]}" --batch_size 128 --max_steps 300 --out "$WORK/mlp_full" >"$WORK/mlp_full.log" 2>&1 ||
  { cat "$WORK/mlp_full.log"; fail "mlp run"; }
out=$WORK/mlp_spares
ft_run 6 "${mlp[@]}" --batch_size 128 --max_steps 300 --shrink.spares 2 --out "$out" >"$out.log" 2>&1 &
job=$!
wait_for_step "$out" 5 "$job"
spare=$(rank_process "$out" 4) lost_spare=$(rank_process "$out" 5)
[[ -n "$spare" && -n "$lost_spare" ]] || fail "spares (launcher ranks 4 and 5) of $out not found"
# The spare's CPU time while it waits: from step 5 to step 150, before any loss.
cpu0=$(cpu_ns "$spare") t0=$(date +%s%N)
wait_for_step "$out" 150 "$job"
cpu1=$(cpu_ns "$spare") t1=$(date +%s%N)
signal_rank "$out" 5 9 "$lost_spare" >/dev/null
signal_after_record "$out" 1 2 9 >/dev/null
finished "$out" "$job" 4
"$COMPARE" "$WORK/mlp_full/final.h5" "$out/final.h5" --exact ||
  fail "fast flat mlp, a spare lost then rank 2 replaced: not bit-identical to the uninterrupted run"
records=$(grep '"kind": "membership"' "$out/metrics.jsonl")
[[ $(wc -l <<<"$records") == 2 ]] || fail "expected 2 membership records: $records"
grep -q '"world_size": 4, "lost": \[\], "replaced": \[\], "spares_lost": \[{"rank": 5, ' <<<"$(head -1 <<<"$records")" ||
  fail "the lost spare's record: $records"
grep -q '"world_size": 4, "lost": \[\], "replaced": \[{"rank": 2, "host": "[^"]*", "by_host": "[^"]*"}\], "spares_lost": \[\], "spares": 0, "recovery_s": ' <<<"$(tail -1 <<<"$records")" ||
  fail "the replacement's record: $records"
"$MIRRORED" info --ranks "$out" >"$WORK/info.out" 2>&1 || { cat "$WORK/info.out"; fail "info --ranks"; }
grep -q "world size 4, lost \[\], replaced \[{\"rank\": 2," "$WORK/info.out" || { cat "$WORK/info.out"; fail "info --ranks: no replacement"; }
# Under 2% of a core while waiting (in tenths of a percent: CPU ns over wall ns).
permille=$(( (cpu1 - cpu0) * 1000 / (t1 - t0) ))
used="$((permille / 10)).$((permille % 10))% of a core ($(( (cpu1 - cpu0) / 1000 )) us of CPU in $(( (t1 - t0) / 1000000 )) ms)"
((permille < 20)) || fail "the waiting spare used $used"
echo "ok: fast flat mlp 4 + 2: spare lost (recorded), rank 2 replaced: bit-identical at world 4; waiting spare at $used"

# 2. More losses than spares: one replaced, then a shrink to 3. Batches of 1024: steps long
# enough that the second loss lands while the job still trains (the first recovery is over).
out=$WORK/mlp_two
ft_run 5 "${mlp[@]}" --batch_size 1024 --max_steps 60 --shrink.spares 1 --out "$out" >"$out.log" 2>&1 &
job=$!
signal_at_step "$out" 10 2 9 "$job" >/dev/null
# The spare (launcher rank 4) now holds world rank 2: the replacement itself is lost.
signal_after_record "$out" 1 4 9 >/dev/null
finished "$out" "$job" 3
records=$(grep '"kind": "membership"' "$out/metrics.jsonl")
grep -q '"world_size": 4, "lost": \[\], "replaced": \[{"rank": 2,' <<<"$(head -1 <<<"$records")" || fail "first record: $records"
grep -q '"world_size": 3, "lost": \[{"rank": 2, "host": "[^"]*"}\], "replaced": \[\], "spares_lost": \[\], "spares": 0' <<<"$(tail -1 <<<"$records")" ||
  fail "second record: $records"
# Nothing lost: the uninterrupted 4-rank run up to the step the shrunk world went on from,
# then 3 ranks from its checkpoint with the batch split 342, 341, 341 as after a shrink,
# give the shrunk job's bits. (Against the uninterrupted 4-rank run the 3 shares sum in
# another order, and how far sgd with momentum carries that rounding depends on the step
# the world shrank at: from 6e-7 to 4e-5 here.)
shrunk_at=$(tail -1 <<<"$records" | grep -o '"step": [0-9]*' | grep -o '[0-9]*')
ft_run 4 "${mlp[@]}" --batch_size 1024 --max_steps "$shrunk_at" --checkpoint.every_steps "$shrunk_at" \
  --out "$WORK/mlp_to_shrink" >"$WORK/mlp_to_shrink.log" 2>&1 || { cat "$WORK/mlp_to_shrink.log"; fail "mlp run"; }
timeout -k 5 120 mpirun --with-ft ulfm --allow-run-as-root --oversubscribe --bind-to none -np 3 "$TRAIN_AS_SHRUNK" \
  "${mlp[@]}" --batch_size 1024 --max_steps 60 --out "$WORK/mlp_three" \
  --resume "$(printf '%s/mlp_to_shrink/checkpoints/ckpt-%09d.h5' "$WORK" "$shrunk_at")" \
  >"$WORK/mlp_three.log" 2>&1 || { cat "$WORK/mlp_three.log"; fail "3 ranks from step $shrunk_at"; }
"$COMPARE" "$WORK/mlp_three/final.h5" "$out/final.h5" --exact ||
  fail "4 + 1, two kills: not bit-identical to 4 ranks to step $shrunk_at, then 3 from its checkpoint"
echo "ok: 4 + 1, two kills: rank 2 replaced, then the spare that took its place lost and the world shrank to 3 at step $shrunk_at: bit-identical to 4 ranks to that step and 3 from there"

# 4. A loss after the last step: rank 2 killed once the last train record is written (the
# final evaluation runs): replaced, the evaluation redone, the loss recorded at the run's end.
# A wider model evaluated on the 60,000 training images keeps the evaluation running for a
# second or more, so the kill lands in it on a quiet machine too (on 10,000 test images with
# the recipe's width it took 0.13 s and could end before the kill).
last=(--batch_size 120 --max_steps 40 --reduction invariant --model.hidden 1024,1024 --data.test "$DATA_DIR/train.h5")
ft_run 4 "${mlp[@]}" "${last[@]}" --out "$WORK/mlp_full40" \
  >"$WORK/mlp_full40.log" 2>&1 || { cat "$WORK/mlp_full40.log"; fail "mlp run"; }
out=$WORK/mlp_last
ft_run 5 "${mlp[@]}" "${last[@]}" --shrink.spares 1 --out "$out" >"$out.log" 2>&1 &
job=$!
signal_at_step "$out" 40 2 9 "$job" >/dev/null
finished "$out" "$job" 4
"$COMPARE" "$WORK/mlp_full40/final.h5" "$out/final.h5" --exact || fail "a loss after the last step: not bit-identical"
records=$(grep '"kind": "membership"' "$out/metrics.jsonl") || { cat "$out.log"; fail "a loss after the last step: no membership record"; }
grep -q '"step": 40, "world_size": 4, "lost": \[\], "replaced": \[{"rank": 2,' <<<"$records" ||
  { cat "$out.log"; fail "a loss after the last step: record $records"; }
grep -aq "no step was left: the run ended" "$out.log" || { cat "$out.log"; fail "a loss after the last step: no membership line"; }
echo "ok: 4 + 1, rank 2 killed in the final evaluation: replaced, recorded at the run's end, bit-identical"

corpus=${SHAKESPEARE_DIR:-$SOURCE_DIR/data/shakespeare}
if [[ -s "$corpus/train.h5" && -s "$corpus/val.h5" ]]; then
  gpt=(--config "$SOURCE_DIR/launch/configs/shakespeare_gpt.ini" --data.train "$corpus/train.h5"
       --data.test "$corpus/val.h5" --max_steps 24 --eval_every 24 --eval_windows 120 --log_every 5
       --checkpoint.every_steps 0 --reduction invariant --threads 1 --progress plain --on_failure shrink)
  ft_run 4 "${gpt[@]}" --out "$WORK/gpt_full" >"$WORK/gpt_full.log" 2>&1 || { cat "$WORK/gpt_full.log"; fail "gpt run"; }
  # 3. The chief killed, a worker killed, another stopped: three spares take their places
  # and receive the sharded adamw state (their shard and the copy they keep).
  out=$WORK/gpt_spares
  ft_run 7 "${gpt[@]}" --optimizer.shard true --shrink.spares 3 --collective_timeout_s 4 --out "$out" >"$out.log" 2>&1 &
  job=$!
  signal_at_step "$out" 5 0 9 "$job" >/dev/null
  signal_after_record "$out" 1 2 9 >/dev/null
  stopped=$(signal_after_record "$out" 2 3 STOP)
  finished "$out" "$job" 4
  grep -q "optimizer shard is also kept by rank + 1" "$out.log" || { cat "$out.log"; fail "no shard-copy line"; }
  "$COMPARE" "$WORK/gpt_full/final.h5" "$out/final.h5" --exact ||
    fail "gpt (invariant, sharded adamw), chief killed, worker killed, worker stopped: not bit-identical to the uninterrupted run"
  records=$(grep '"kind": "membership"' "$out/metrics.jsonl")
  for rank in 0 2 3; do
    grep -q "\"world_size\": 4, \"lost\": \[\], \"replaced\": \[{\"rank\": $rank," <<<"$records" ||
      fail "no record of rank $rank's replacement: $records"
  done
  grep -aq "rank 3 (pid $stopped on .*) was still there, stopped or hung: ended it" "$out.log" ||
    { cat "$out.log"; fail "no survivor says it ended the stopped rank"; }
  echo "ok: gpt invariant, sharded adamw with clipping, 4 + 3: chief killed, worker killed, worker stopped: each replaced, bit-identical at world 4"
else
  echo "note: the Shakespeare corpus is not imported in $corpus; the gpt parts are skipped"
fi
echo "spares: ok in $((SECONDS - start)) s"
