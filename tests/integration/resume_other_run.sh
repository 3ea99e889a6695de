#!/usr/bin/env bash
# resume = auto continues only the run its directory holds. A new run given an old run's
# --out with another value of a key that changes the result is refused (exit 2), naming the
# keys and the ways out, and the stored config.ini stays; an unchanged run (a requeued job)
# resumes; a finished run says so and exits 0 without training or touching its files;
# --resume never starts over, and naming the checkpoints continues with a warning.
source "$(dirname "$0")/lib.sh"
require_data
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1
        --model.hidden 16 --seed 3 --threads 1 --checkpoint.every_steps 10)
run=$WORK/run

# Stopped at step 10 (a preempted or killed job), then requeued unchanged, at another world
# size and thread count (operational keys): it resumes and finishes at step 20.
mpirun_np 2 train "${common[@]}" --max_steps 10 --out "$run" > "$WORK/first.log" 2>&1 ||
  { cat "$WORK/first.log"; fail "first run"; }
"$MIRRORED" train "${common[@]}" --max_steps 20 --out "$run" > "$WORK/requeued.log" 2>&1 ||
  { cat "$WORK/requeued.log"; fail "the requeued run failed"; }
grep -q "resuming from '$run/checkpoints/ckpt-000000010.h5'" "$WORK/requeued.log" ||
  { cat "$WORK/requeued.log"; fail "the requeued run did not resume"; }
[[ -s "$run/final.h5" ]] || fail "no final.h5 after the requeued run"
echo "ok: an unchanged requeued run resumes"

# Another learning rate and optimizer in the same directory: refused, naming both keys and
# the two ways out; nothing of the old run changes.
cp "$run/config.ini" "$WORK/config.before"
sum_before=$(md5sum "$run/final.h5" "$run/metrics.jsonl" "$run"/checkpoints/* | md5sum)
expect_exit 2 other_config "holds a run with another configuration" 30 2 train "${common[@]}" --max_steps 20 \
  --out "$run" --lr 0.1 --optimizer adam
for text in "optimizer sgd -> adam" "lr 0.05 -> 0.1" "--out DIR" "--resume never" "--resume $run/checkpoints"; do
  grep -qF -- "$text" "$WORK/other_config.out" || { cat "$WORK/other_config.out"; fail "the refusal lacks '$text'"; }
done
[[ $(grep -c "holds a run with another configuration" "$WORK/other_config.out") -eq 1 ]] ||
  { cat "$WORK/other_config.out"; fail "the refusal is not printed exactly once"; }
cmp -s "$WORK/config.before" "$run/config.ini" || fail "the refused run overwrote config.ini"
[[ "$(md5sum "$run/final.h5" "$run/metrics.jsonl" "$run"/checkpoints/* | md5sum)" == "$sum_before" ]] ||
  fail "the refused run changed the old run's files"
echo "ok: another configuration is refused: $(grep -o "holds a run.*" "$WORK/other_config.out" | cut -c1-120)..."

# The same run once more: finished, exit 0, no training, no file touched.
mpirun_np 2 train "${common[@]}" --max_steps 20 --out "$run" > "$WORK/again.log" 2>&1 ||
  { cat "$WORK/again.log"; fail "rerunning a finished run failed"; }
grep -q "this run is finished (step 20 of 20" "$WORK/again.log" || { cat "$WORK/again.log"; fail "not said finished"; }
! grep -qE "final test accuracy|resuming from" "$WORK/again.log" || { cat "$WORK/again.log"; fail "it trained or evaluated"; }
[[ "$(md5sum "$run/final.h5" "$run/metrics.jsonl" "$run"/checkpoints/* | md5sum)" == "$sum_before" ]] ||
  fail "rerunning the finished run changed its files"
echo "ok: a finished run says so and exits 0: $(grep -o "this run is finished.*" "$WORK/again.log" | cut -c1-60)"

# More steps extend the finished run (max_steps does not change the result).
mpirun_np 2 train "${common[@]}" --max_steps 30 --out "$run" > "$WORK/extended.log" 2>&1 ||
  { cat "$WORK/extended.log"; fail "extending the run failed"; }
grep -q "resuming from '$run/checkpoints/ckpt-000000020.h5'" "$WORK/extended.log" ||
  { cat "$WORK/extended.log"; fail "the extended run did not resume at 20"; }
echo "ok: a larger max_steps extends the run"

# The ways out: naming the checkpoints continues with the new value (and a warning);
# --resume never starts over.
cp -r "$run" "$WORK/named"
"$MIRRORED" train "${common[@]}" --max_steps 40 --out "$WORK/named" --lr 0.1 --resume "$WORK/named/checkpoints" \
  > "$WORK/named.log" 2>&1 || { cat "$WORK/named.log"; fail "--resume DIR with another lr failed"; }
grep -q "lr 0.05 -> 0.1.*will not reproduce" "$WORK/named.log" || { cat "$WORK/named.log"; fail "no warning"; }
"$MIRRORED" train "${common[@]}" --max_steps 10 --out "$run" --lr 0.1 --resume never \
  > "$WORK/never.log" 2>&1 || { cat "$WORK/never.log"; fail "--resume never failed"; }
! grep -q "resuming from" "$WORK/never.log" || fail "--resume never resumed"
grep -q "resume = never: removed the earlier run in .$run. (3 checkpoint(s), " "$WORK/never.log" ||
  { cat "$WORK/never.log"; fail "--resume never did not say that it removes the old checkpoints"; }
[[ "$(ls "$run/checkpoints")" == "ckpt-000000010.h5" ]] || fail "old checkpoints left: $(ls "$run/checkpoints")"
grep -q "^lr = 0.1$" "$run/config.ini" || fail "config.ini of the new run does not hold lr = 0.1"
echo "ok: --resume DIR continues with a warning, --resume never starts over"
