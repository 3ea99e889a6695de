#!/usr/bin/env bash
# optimizer.shard (ZeRO stage 1): sharded runs equal unsharded ones up to float summation
# order and repeat bit-identically; each of 4 replicas holds a quarter of the optimizer
# state (the memory record); checkpoints hold the logical state, so a run resumes at another
# world size and either sharding setting (4 sharded -> 1, 1 -> 3 sharded, 2 sharded -> 4
# sharded) to the world-size tolerance, and bit-identically at the same world and setting.
source "$(dirname "$0")/lib.sh"
require_data
# 48 divides over 1, 2, 3 and 4 replicas. AdamW with weight decay (only on the weights).
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 48 --epochs 1
        --model.hidden 32 --optimizer adamw --lr 0.003 --weight_decay 0.1 --seed 5 --threads 1
        --checkpoint.every_steps 15 --checkpoint.every_epochs 0 --bucket_mb 0.004)
shard=(--optimizer.shard true)
upto=(--max_steps 30 --quiet)

"$MIRRORED" train "${common[@]}" "${upto[@]}" --out "$WORK/w1"
mpirun_np 2 train "${common[@]}" "${upto[@]}" --out "$WORK/w2"
mpirun_np 2 train "${common[@]}" "${upto[@]}" "${shard[@]}" --out "$WORK/s2"
mpirun_np 2 train "${common[@]}" "${upto[@]}" "${shard[@]}" --out "$WORK/s2again"
mpirun_np 4 train "${common[@]}" "${upto[@]}" "${shard[@]}" --out "$WORK/s4"
# The tolerance of world_size_equivalence.sh: only the summation order differs.
"$COMPARE" "$WORK/w2/final.h5" "$WORK/s2/final.h5" --rtol 1e-5
"$COMPARE" "$WORK/w1/final.h5" "$WORK/s4/final.h5" --rtol 1e-5
"$COMPARE" "$WORK/s2/final.h5" "$WORK/s2again/final.h5" --exact
echo "ok: sharded adamw equals unsharded (world 2, and world 4 against 1); sharded twice is bit-identical"

# SGD with momentum and a cnn with sync batch norm, sharded against unsharded.
sgd=(--optimizer sgd --lr 0.05 --momentum 0.9)
mpirun_np 2 train "${common[@]}" "${upto[@]}" "${sgd[@]}" --out "$WORK/sgd"
mpirun_np 2 train "${common[@]}" "${upto[@]}" "${sgd[@]}" "${shard[@]}" --out "$WORK/sgd.s"
"$COMPARE" "$WORK/sgd/final.h5" "$WORK/sgd.s/final.h5" --rtol 1e-5
cnn=(--model cnn --cnn.channels 4,8 --cnn.fc 16 --cnn.batchnorm true --model.sync_batchnorm true --max_steps 8 --quiet)
mpirun_np 2 train "${common[@]}" "${cnn[@]}" --out "$WORK/cnn"
mpirun_np 2 train "${common[@]}" "${cnn[@]}" "${shard[@]}" --out "$WORK/cnn.s"
"$COMPARE" "$WORK/cnn/final.h5" "$WORK/cnn.s/final.h5" --rtol 1e-5
echo "ok: sharded sgd (mlp) and adamw (cnn, sync batch norm) equal unsharded"

# The first record of metrics.jsonl is the memory record; 4 sharded replicas hold a quarter.
first=$(head -1 "$WORK/s4/metrics.jsonl")
[[ "$first" == *'"kind": "memory"'* ]] || fail "first metrics record is not the memory record: $first"
state1=$(json_field "$WORK/w1/metrics.jsonl" memory optimizer_state_bytes)
state4=$(json_field "$WORK/s4/metrics.jsonl" memory optimizer_state_bytes)
params4=$(json_field "$WORK/s4/metrics.jsonl" memory param_bytes)
# Balanced shards: the largest is at most one element (two moments of 4 bytes) above 1/4.
((state4 * 4 >= state1 && state4 * 4 <= state1 + 4 * 8)) ||
  fail "4 sharded replicas hold $state4 bytes of optimizer state each, unsharded $state1"
((state1 == 2 * params4)) || fail "adamw holds $state1 bytes of state for $params4 bytes of parameters"
echo "ok: optimizer state per replica: $state1 bytes unsharded, $state4 bytes sharded over 4"

# Resharded resumes: a run stopped at step 15 continues to 30 elsewhere.
resume_check() {  # resume_check NAME FROM_NP FROM_ARGS TO_NP TO_ARGS
  local name=$1 from_np=$2 from_args=$3 to_np=$4 to_args=$5
  # shellcheck disable=SC2086
  mpirun_np "$from_np" train "${common[@]}" --max_steps 15 --quiet $from_args --out "$WORK/$name"
  # shellcheck disable=SC2086
  mpirun_np "$to_np" train "${common[@]}" --max_steps 30 $to_args --out "$WORK/$name" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "$name: resume failed"; }
  grep -q "resuming from '$WORK/$name/checkpoints/ckpt-000000015.h5'" "$WORK/$name.log" ||
    { cat "$WORK/$name.log"; fail "$name: did not resume from step 15"; }
}
resume_check s4to1 4 "--optimizer.shard true" 1 ""
"$COMPARE" "$WORK/w1/final.h5" "$WORK/s4to1/final.h5" --rtol 1e-5
resume_check w1to3 1 "" 3 "--optimizer.shard true"
"$COMPARE" "$WORK/w1/final.h5" "$WORK/w1to3/final.h5" --rtol 1e-5
resume_check s2to4 2 "--optimizer.shard true" 4 "--optimizer.shard true"
"$COMPARE" "$WORK/s2/final.h5" "$WORK/s2to4/final.h5" --rtol 1e-5
resume_check s2to2 2 "--optimizer.shard true" 2 "--optimizer.shard true"
"$COMPARE" "$WORK/s2/final.h5" "$WORK/s2to2/final.h5" --exact
echo "ok: resumed 4 sharded -> 1, 1 -> 3 sharded, 2 sharded -> 4 sharded (rtol 1e-5); 2 sharded -> 2 sharded exact"

# Combinations without a sharded path are refused naming the keys.
expect_exit 2 shard_bf16 "optimizer.shard = true with grad_compression = bf16" 30 2 train "${common[@]}" \
  "${shard[@]}" --grad_compression bf16 --out "$WORK/x"
expect_exit 2 shard_hierarchical "optimizer.shard = true with allreduce = hierarchical" 30 2 train "${common[@]}" \
  "${shard[@]}" --allreduce hierarchical --out "$WORK/x"

# nan_policy with sharded gradients: a NaN in any replica's shard stops (or skips) the step
# on every replica (lr = 1e6 overflows SGD within three steps, as in non_finite.sh).
nan=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1
     --model.hidden 256,128 --threads 1 --lr 1000000 "${shard[@]}")
expect_exit 6 shard_nan_stop "the averaged gradients hold NaN/Inf" 20 2 train "${nan[@]}" --out "$WORK/stopped"
mpirun_np 2 train "${nan[@]}" --max_steps 20 --nan_policy skip --out "$WORK/skipped" > "$WORK/skipped.log" 2>&1 ||
  { cat "$WORK/skipped.log"; fail "sharded nan_policy = skip did not finish"; }
(cd "$WORK/skipped" && h5dump final.h5) > "$WORK/skipped.txt"  # no path in the dump: it could hold "nan"
! grep -qiE "nan|inf" "$WORK/skipped.txt" || fail "final.h5 of the sharded skipping run holds NaN/Inf"
echo "ok: sharded nan_policy = stop and skip"
