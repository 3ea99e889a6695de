#!/usr/bin/env bash
# A real training: 2 ranks, MLP 256-128, 3 epochs of Fashion-MNIST reach test accuracy >= 0.85.
source "$(dirname "$0")/lib.sh"
require_data
mpirun_np 2 train --config "$SOURCE_DIR/launch/configs/fmnist_mlp.ini" \
  --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --out "$WORK/run" | tee "$WORK/log"
acc=$(json_field "$WORK/run/metrics.jsonl" eval test_accuracy)
echo "final test accuracy: $acc"
[[ -s "$WORK/run/final.h5" && -s "$WORK/run/config.ini" ]] || fail "run directory incomplete"
grep -q '"kind": "train"' "$WORK/run/metrics.jsonl" || fail "no training records"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "test accuracy $acc < 0.85"
