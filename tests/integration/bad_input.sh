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
# A model larger than the host: refused before anything is allocated, with what each flat
# buffer needs against what the host has (not std::bad_alloc).
expect_exit 2 model_beyond_host_memory "the model does not fit in this host's memory" 20 \
  2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --model.hidden 100000000,100000000
grep -q "this host has .* available). The largest parameter is 2.linear.weight \[100000000, 100000000\]" \
  "$WORK/model_beyond_host_memory.out" || { cat "$WORK/model_beyond_host_memory.out"; fail "no per-buffer sizes"; }
! grep -q "bad_alloc" "$WORK/model_beyond_host_memory.out" || fail "model_beyond_host_memory: std::bad_alloc"
# More threads than the CPUs a rank may use: capped there with a warning, and the run goes on.
allowed=$(nproc)
mpirun_np 2 train "${base[@]}" --data.train "$DATA_DIR/train.h5" --threads 100000 --out "$WORK/threads" \
  >"$WORK/threads.out" 2>&1 || { cat "$WORK/threads.out"; fail "threads_beyond_cpus: the run failed"; }
grep -q "threads = 100000 is more than the [0-9]* CPU(s) a rank may use" "$WORK/threads.out" ||
  { cat "$WORK/threads.out"; fail "threads_beyond_cpus: no warning"; }
used=$(sed -nE 's/.* ([0-9]+) thread\(s\)\/rank.*/\1/p' "$WORK/threads.out" | head -1)
[[ -n $used && $used -ge 1 && $used -le $allowed ]] ||
  { cat "$WORK/threads.out"; fail "threads_beyond_cpus: $used thread(s)/rank, expected 1..$allowed"; }
echo "ok: threads_beyond_cpus: capped at $used thread(s)/rank with a warning"
