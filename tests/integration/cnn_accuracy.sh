#!/usr/bin/env bash
# Real training of the image models on 2 ranks, short enough for CI: the cnn with sync
# batch norm (launch/configs/fmnist_cnn.ini) for 150 steps and the resnet
# (launch/configs/fmnist_resnet.ini, narrowed) for 80 steps must clearly learn. The full
# runs take 7 and 18 minutes on 2 cores and are reported, not run here: cnn 0.9152 after 5
# epochs, resnet 0.925 after 10 (targets 0.91 and 0.92).
source "$(dirname "$0")/lib.sh"
require_data
data=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --threads 1)
mpirun_np 2 train --config "$SOURCE_DIR/launch/configs/fmnist_cnn.ini" "${data[@]}" --epochs 1 --max_steps 150 \
  --out "$WORK/cnn"
mpirun_np 2 train --config "$SOURCE_DIR/launch/configs/fmnist_resnet.ini" "${data[@]}" --epochs 1 --max_steps 80 \
  --resnet.channels 8,16,32 --out "$WORK/resnet"
cnn=$(json_field "$WORK/cnn/metrics.jsonl" eval test_accuracy)
resnet=$(json_field "$WORK/resnet/metrics.jsonl" eval test_accuracy)
echo "test accuracy: cnn $cnn after 150 steps, resnet $resnet after 80 steps"
# Measured: cnn 0.845-0.851; resnet 0.47-0.72 over seeds 1, 2, 3 and 7 and small changes
# to the update (weight decay on batch norm or not): after 80 steps at lr 0.05 its batch-norm
# running statistics have not settled, so its test accuracy swings by 0.25 on a change that
# rounds differently. Chance is 0.1; the thresholds leave room for other BLAS builds and
# rounding while still failing a model that does not learn.
awk -v a="$cnn" 'BEGIN { exit !(a >= 0.80) }' || fail "cnn test accuracy $cnn < 0.80"
awk -v a="$resnet" 'BEGIN { exit !(a >= 0.35) }' || fail "resnet test accuracy $resnet < 0.35"
