#!/usr/bin/env bash
# The contract: one global batch, seed and data order give the same model at world size
# 1, 2 and 4 (up to float summation order), and the same world size twice is bit-identical.
source "$(dirname "$0")/lib.sh"
require_data
common=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1
        --max_steps 60 --model.hidden 64,32 --lr 0.05 --momentum 0.9 --seed 3 --threads 1 --quiet)
"$MIRRORED" train "${common[@]}" --out "$WORK/w1"
mpirun_np 2 train "${common[@]}" --out "$WORK/w2"
mpirun_np 2 train "${common[@]}" --out "$WORK/w2again"
mpirun_np 4 train "${common[@]}" --out "$WORK/w4"
# 60 SGD steps: each step's gradients differ from world 1 only by float32 summation order
# (relative ~6e-8 per rounding); momentum and the nonlinearity carry that forward, and we
# measured ~5e-7 relative after 60 steps. 1e-5 leaves 20x headroom and is still far below
# a real bug (a wrong split, a missing average or a replica with other data moves the
# parameters by > 1e-3 relative within a few steps).
"$COMPARE" "$WORK/w1/final.h5" "$WORK/w2/final.h5" --rtol 1e-5
"$COMPARE" "$WORK/w1/final.h5" "$WORK/w4/final.h5" --rtol 1e-5
"$COMPARE" "$WORK/w2/final.h5" "$WORK/w2again/final.h5" --exact
# Augmentation is drawn per (seed, epoch, sample), so it keeps the contract too, and it
# does change training (otherwise the comparison above would prove nothing about it).
augment=(--augment.flip true --augment.crop_padding 2)
"$MIRRORED" train "${common[@]}" "${augment[@]}" --out "$WORK/augment.w1"
mpirun_np 4 train "${common[@]}" "${augment[@]}" --out "$WORK/augment.w4"
"$COMPARE" "$WORK/augment.w1/final.h5" "$WORK/augment.w4/final.h5" --rtol 1e-5
if "$COMPARE" "$WORK/w1/final.h5" "$WORK/augment.w1/final.h5" --rtol 1e-2 > /dev/null; then
  fail "training with augmentation ended where training without it did"
fi
echo "ok: augmented training agrees at world 1 and 4"
