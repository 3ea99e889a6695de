#!/usr/bin/env bash
# Bad input: a clear message naming the file/field, a non-zero exit on every rank, fast.
source "$(dirname "$0")/lib.sh"
require_data
echo "this is not HDF5" > "$WORK/not_hdf5.h5"
printf 'batch_size = 64\nlearnin_rate = 0.1\n' > "$WORK/unknown_key.ini"
base=(--data.test "$DATA_DIR/test.h5" --epochs 1 --max_steps 2 --out "$WORK/run")
expect_failure missing_data_file "$WORK/missing.h5" 20 \
  2 train "${base[@]}" --data.train "$WORK/missing.h5"
expect_failure non_hdf5_file "is not an HDF5 file" 20 \
  2 train "${base[@]}" --data.train "$WORK/not_hdf5.h5"
expect_failure batch_not_divisible "does not divide evenly over 4 replicas" 20 \
  4 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --batch_size 130
expect_failure unknown_config_key "unknown key 'learnin_rate'" 20 \
  2 train --config "$WORK/unknown_key.ini" "${base[@]}" --data.train "$DATA_DIR/train.h5"
expect_failure negative_lr "lr = '-1': expected a number > 0" 20 \
  2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --lr=-1
expect_exit 2 zero_batch "batch_size = '0': expected an integer >= 1" 20 \
  2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --batch_size 0
expect_exit 2 unknown_optimizer "optimizer = 'adagrad': expected one of: sgd, adam, adamw" 20 \
  2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --optimizer adagrad
expect_exit 2 bad_nan_policy "nan_policy = 'ignore': expected one of: stop, skip" 20 \
  2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --nan_policy ignore
expect_exit 2 negative_checkpoint_interval "checkpoint.every_steps = '-5': expected an integer >= 0" 20 \
  2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --checkpoint.every_steps=-5
expect_exit 2 crop_padding_too_large "augment.crop_padding = 28: expected less than 28" 20 \
  2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --augment.crop_padding 28
expect_exit 2 step_schedule_without_milestones "lr_schedule = step: expected lr_milestones" 20 \
  2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --lr_schedule step
