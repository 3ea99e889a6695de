#!/usr/bin/env bash
# NaN/Inf gradients. lr = 1e6 makes SGD overflow within three steps (real divergence, no
# test hook): nan_policy = stop ends the job with exit 6 naming the step and the last good
# checkpoint (the state after the last finite update); nan_policy = skip leaves every update with a non-finite
# gradient out and the run finishes with finite parameters.
source "$(dirname "$0")/lib.sh"
require_data
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1
        --model.hidden 256,128 --threads 1 --checkpoint.every_steps 1)
expect_exit 6 nan_stop "the averaged gradients hold NaN/Inf" 20 2 train "${common[@]}" --lr 1000000 --out "$WORK/stop"
grep -q "training stopped before applying them (nan_policy = stop). The last good checkpoint is '$WORK/stop/checkpoints/ckpt-" \
  "$WORK/nan_stop.out" || { cat "$WORK/nan_stop.out"; fail "the message does not name the last good checkpoint"; }
[[ ! -e "$WORK/stop/final.h5" ]] || fail "final.h5 written by a run that stopped on NaN"
# The last good checkpoint holds exactly the state after step 2, the last finite update.
mpirun_np 2 train "${common[@]}" --lr 1000000 --max_steps 2 --out "$WORK/two" > "$WORK/two.log" 2>&1 ||
  { cat "$WORK/two.log"; fail "two steps at lr 1e6"; }
"$COMPARE" "$WORK/stop/checkpoints/ckpt-000000002.h5" "$WORK/two/final.h5" --exact

mpirun_np 2 train "${common[@]}" --lr 1000000 --max_steps 40 --nan_policy skip --out "$WORK/skip" \
  > "$WORK/skip.log" 2>&1 || { cat "$WORK/skip.log"; fail "nan_policy = skip did not finish"; }
grep -Eo "skipped [0-9]+ step\(s\) with NaN/Inf gradients" "$WORK/skip.log" || { cat "$WORK/skip.log"; fail "no skip count"; }
h5dump "$WORK/skip/final.h5" > "$WORK/skip_params.txt"
! grep -qiE "nan|inf" "$WORK/skip_params.txt" || fail "final.h5 of the skipping run holds NaN/Inf"
echo "ok: nan_policy = skip finished with finite parameters"
