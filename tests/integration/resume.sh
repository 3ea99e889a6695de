#!/usr/bin/env bash
# Checkpoints and resume: a run stopped after 100 steps and resumed at the same world size
# ends bit-identical to the uninterrupted run, with the same training records; resumed at
# another world size it agrees to float summation order; a truncated or bit-flipped newest
# checkpoint is named, skipped, and the previous one is used; none usable -> exit 4. The
# runs use a warmup + cosine learning-rate schedule, which resumes from the step alone.
source "$(dirname "$0")/lib.sh"
require_data
# The test set as training data: 156 steps per epoch of 64, a second or two per run. 200
# steps cross an epoch end; much longer runs at different world sizes drift apart beyond
# 1e-5 (measured: 5e-7 up to step 260, 5e-4 at 290, 2e-2 at 312, without any resume).
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 2
        --model.hidden 32 --lr 0.05 --momentum 0.9 --seed 11 --threads 1 --log_every 25
        --lr_schedule cosine --lr_warmup_epochs 0.2 --lr_min 0.001
        --checkpoint.every_steps 20 --checkpoint.keep 3)
upto=(--max_steps 200)
train_records() { without_timings "$1" | grep '"kind": "train"'; }
# flip_payload_byte FILE: changes one byte inside the raw data of the first weight matrix.
flip_payload_byte() {
  local offset
  offset=$(h5dump -p -H -d /params/0.linear.weight "$1" | sed -nE 's/^ *OFFSET ([0-9]+).*/\1/p')
  [[ -n "$offset" ]] || fail "no raw-data offset for /params/0.linear.weight in $1"
  local byte
  byte=$(od -An -tu1 -j $((offset + 1000)) -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $(((byte + 1) % 256)))" |
    dd of="$1" bs=1 seek=$((offset + 1000)) count=1 conv=notrunc status=none
}

mpirun_np 2 train "${common[@]}" "${upto[@]}" --out "$WORK/full" > "$WORK/full.log"
mpirun_np 2 train "${common[@]}" --out "$WORK/part" --max_steps 100 > "$WORK/part.log"
ls "$WORK/part/checkpoints" | tr '\n' ' '; echo
[[ $(ls "$WORK/part/checkpoints" | wc -l) -eq 3 ]] || fail "checkpoint.keep = 3 not honoured"
for copy in same w1 w4 truncated flipped; do cp -r "$WORK/part" "$WORK/$copy"; done

# Same world size: bit-identical parameters and training records.
mpirun_np 2 train "${common[@]}" "${upto[@]}" --out "$WORK/same" > "$WORK/same.log" 2>&1 || { cat "$WORK/same.log"; fail "resume"; }
grep -q "resuming from '$WORK/same/checkpoints/ckpt-000000100.h5'" "$WORK/same.log" ||
  { cat "$WORK/same.log"; fail "did not resume from step 100"; }
"$COMPARE" "$WORK/full/final.h5" "$WORK/same/final.h5" --exact
diff <(train_records "$WORK/full/metrics.jsonl") <(train_records "$WORK/same/metrics.jsonl") ||
  fail "training records of the resumed run differ from the uninterrupted run"
echo "ok: same world size resume is bit-identical ($(train_records "$WORK/same/metrics.jsonl" | wc -l) records)"
# The logged rate is the schedule's: 31 warmup steps (0.2 x 156), then cosine to 0.001 at
# the end of epoch 2 (step 312), whatever max_steps says.
check_lr() {  # check_lr STEP EXPECTED
  local logged
  logged=$(grep "\"step\": $1," "$WORK/same/metrics.jsonl" | grep '"kind": "train"' | sed -nE 's/.*"lr": ([^,}]+).*/\1/p')
  awk -v a="$logged" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * b) }' ||
    fail "lr at step $1: logged '$logged', expected $2"
}
check_lr 25 "$(awk 'BEGIN { printf "%.10g", 0.05 * 25 / 31 }')"
check_lr 125 "$(awk 'BEGIN { pi = atan2(0, -1); printf "%.10g", 0.001 + 0.049 * 0.5 * (1 + cos(pi * (124 - 31) / 281)) }')"
check_lr 200 "$(awk 'BEGIN { pi = atan2(0, -1); printf "%.10g", 0.001 + 0.049 * 0.5 * (1 + cos(pi * 168 / 281)) }')"
echo "ok: logged learning rates follow warmup + cosine"

# Other world sizes, same global batch: equal up to float summation order (the tolerance
# of world_size_equivalence.sh; measured ~5e-7).
"$MIRRORED" train "${common[@]}" "${upto[@]}" --out "$WORK/w1" > "$WORK/w1.log" 2>&1 || { cat "$WORK/w1.log"; fail "w1"; }
grep -q "written by 2 replica(s), this run has 1" "$WORK/w1.log" || { cat "$WORK/w1.log"; fail "no world-size note"; }
mpirun_np 4 train "${common[@]}" "${upto[@]}" --out "$WORK/w4" > "$WORK/w4.log" 2>&1
"$COMPARE" "$WORK/full/final.h5" "$WORK/w1/final.h5" --rtol 1e-5
"$COMPARE" "$WORK/full/final.h5" "$WORK/w4/final.h5" --rtol 1e-5
echo "ok: resumed at world size 1 and 4 within rtol 1e-5"

# A damaged newest checkpoint is named and skipped; the previous one gives the same result.
truncate -s 60000 "$WORK/truncated/checkpoints/ckpt-000000100.h5"
flip_payload_byte "$WORK/flipped/checkpoints/ckpt-000000100.h5"
for damaged in truncated flipped; do
  mpirun_np 2 train "${common[@]}" "${upto[@]}" --out "$WORK/$damaged" > "$WORK/$damaged.log" 2>&1 ||
    { cat "$WORK/$damaged.log"; fail "$damaged: resume failed"; }
  grep -q "skipping checkpoint '$WORK/$damaged/checkpoints/ckpt-000000100.h5'" "$WORK/$damaged.log" ||
    { cat "$WORK/$damaged.log"; fail "$damaged: the damaged checkpoint is not named"; }
  grep -q "resuming from '$WORK/$damaged/checkpoints/ckpt-000000080.h5'" "$WORK/$damaged.log" ||
    { cat "$WORK/$damaged.log"; fail "$damaged: did not fall back to step 80"; }
  "$COMPARE" "$WORK/full/final.h5" "$WORK/$damaged/final.h5" --exact
  echo "ok: $damaged newest checkpoint: $(grep -o "skipping checkpoint.*" "$WORK/$damaged.log" | head -1 | cut -c1-160)"
done
grep -q "checksum mismatch" "$WORK/flipped.log" || fail "a flipped payload byte was not reported as a checksum mismatch"

# Nothing usable: a clear message and exit 4, never a silent fresh start.
cp -r "$WORK/part" "$WORK/bad"
for f in "$WORK"/bad/checkpoints/*.h5; do truncate -s 5000 "$f"; done
expect_exit 4 no_valid_checkpoint "none of the 3 checkpoint(s)" 30 2 train "${common[@]}" "${upto[@]}" --out "$WORK/bad"
expect_exit 4 resume_missing_path "nope.h5" 30 2 train "${common[@]}" "${upto[@]}" --out "$WORK/x" --resume "$WORK/nope.h5"
# A checkpoint of another model is refused, once, naming the model it holds and this run's.
expect_exit 4 resume_other_model "' holds an mlp model (hidden " 30 2 train --data.train "$DATA_DIR/test.h5" \
  --data.test "$DATA_DIR/test.h5" --batch_size 64 --model.hidden 16 --threads 1 --out "$WORK/x2" \
  --resume "$WORK/part/checkpoints/ckpt-000000100.h5"
grep -q "this run builds an mlp (hidden 16)" "$WORK/resume_other_model.out" || fail "resume_other_model: no model of this run"
[[ $(grep -c "holds an mlp model" "$WORK/resume_other_model.out") -eq 1 ]] ||
  { cat "$WORK/resume_other_model.out"; fail "resume_other_model: the mismatch is not said once"; }

# A model with batch norm: its running statistics are in the checkpoint too, so a resumed
# run evaluates and ends exactly like the uninterrupted one (they used to restart at 0/1).
bn=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1 --model cnn
    --cnn.channels 4,8 --cnn.fc 16 --cnn.batchnorm true --model.sync_batchnorm false --threads 1 --seed 3
    --checkpoint.every_steps 10 --quiet)
mpirun_np 2 train "${bn[@]}" --max_steps 30 --out "$WORK/bn.full"
mpirun_np 2 train "${bn[@]}" --max_steps 10 --out "$WORK/bn.part"
mpirun_np 2 train "${bn[@]}" --max_steps 30 --out "$WORK/bn.part"
"$COMPARE" "$WORK/bn.full/final.h5" "$WORK/bn.part/final.h5" --exact
echo "ok: batch norm running statistics survive a resume"
