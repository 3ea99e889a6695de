#!/usr/bin/env bash
# `mirrored info --ranks RUN_DIR` reads every record mirrored writes to metrics.jsonl: a real
# 2-rank run's memory, train, rank_scores, straggler (straggler.threshold 1 flags a rank at
# every log point) and eval records, `mirrored eval --json`'s record appended, and a
# membership record as on_failure = shrink writes it (elastic/membership.cpp; the real one is
# read in it.shrink_continue). Each kind must be present, and the report must show the
# scores of both ranks and the membership change. Then ranks.jsonl and `mirrored ps`.
source "$(dirname "$0")/lib.sh"

timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train \
  --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --model mlp --max_steps 20 --log_every 5 \
  --threads 1 --batch_size 64 --straggler.threshold 1 --straggler.window 1 --quiet --out "$WORK/run" > "$WORK/train.log" 2>&1 ||
  { cat "$WORK/train.log"; fail "the 2-rank run"; }
"$MIRRORED" eval --checkpoint "$WORK/run" --data "$DATA_DIR/test.h5" --json >> "$WORK/run/metrics.jsonl"
echo '{"kind": "membership", "step": 12, "world_size": 1, "lost": [{"rank": 1, "host": "node-b"}], "recovery_s": 1.25}' \
  >> "$WORK/run/metrics.jsonl"
for kind in memory train rank_scores straggler eval membership; do
  grep -q "\"kind\": \"$kind\"" "$WORK/run/metrics.jsonl" || { cat "$WORK/run/metrics.jsonl"; fail "no $kind record"; }
done
"$MIRRORED" info --ranks "$WORK/run" > "$WORK/info.out" 2>&1 || { cat "$WORK/info.out"; fail "info --ranks exited $?"; }
cat "$WORK/info.out"
grep -q "^  step 12: world size 1, lost \[{\"rank\": 1, \"host\": \"node-b\"}\]" "$WORK/info.out" ||
  fail "info --ranks does not show the membership change"
grep -qE "^  1  [0-9.]+" "$WORK/info.out" || fail "info --ranks shows no scores for rank 1"
echo "ok: info --ranks read every kind of record"

# ranks.jsonl: both ranks of the world, and `mirrored ps` on it (the run has ended: gone).
[[ $(grep -c '"world_size": 2, "step": 0' "$WORK/run/ranks.jsonl") -eq 2 ]] ||
  { cat "$WORK/run/ranks.jsonl"; fail "ranks.jsonl does not list the 2 ranks"; }
"$MIRRORED" ps "$WORK/run" > "$WORK/ps.out" 2>&1 || { cat "$WORK/ps.out"; fail "ps exited $?"; }
cat "$WORK/ps.out"
for rank in 0 1; do
  pid=$(sed -nE "s/.*\"rank\": $rank, \"host\": \"[^\"]*\", \"pid\": ([0-9]+),.*/\1/p" "$WORK/run/ranks.jsonl")
  grep -qE "^$rank  $(hostname)  $pid  -  gone" "$WORK/ps.out" || fail "ps: rank $rank (pid $pid) not shown as gone"
done
echo "ok: ps lists the run's ranks"
