#!/usr/bin/env bash
# reduction = invariant: the same bits at any world size, thread count and resume point.
#  1. The gpt recipe (launch/configs/shakespeare_gpt.ini: AdamW, grad_clip, cosine schedule,
#     evaluations) for 40 steps at world sizes 1, 2, 3, 4 and 6 over its 12-window global
#     batch (6 virtual replicas of 2 windows: world 4 holds them 2, 2, 1, 1): final.h5 and
#     every loss, grad_norm and evaluation record bit-identical.
#  2. The mlp at 1, 3 and 4 ranks with --threads 1 and 2 (8 virtual replicas of 8 images).
#  3. Sharded AdamW with clipping at 4 ranks, stopped at step 20 and resumed at 3 ranks:
#     the straight 4-rank run's parameters and records, bit for bit; bf16 at 1 and 3 ranks.
#  4. The refusals: a fast checkpoint resumed as invariant, sync batch norm, a world larger
#     than reduction.shards, shards that do not divide the batch.
# And fast mode is not invariant here (otherwise 1 would prove nothing).
source "$(dirname "$0")/lib.sh"
require_data
corpus=${SHAKESPEARE_DIR:-$SOURCE_DIR/data/shakespeare}
[[ -s "$corpus/train.h5" && -s "$corpus/val.h5" ]] ||
  { echo "SKIP: the Shakespeare corpus is not imported in $corpus (run launch/import_shakespeare.sh)"; exit 77; }

records() { without_timings "$1" | grep -v '"kind": "memory"' | sed -E 's/, "(tokens_per_sec|world_size)": [^,}]*//g'; }
same_run() {  # same_run A B: parameters and records bit-identical
  "$COMPARE" "$WORK/$1/final.h5" "$WORK/$2/final.h5" --exact > /dev/null ||
    { "$COMPARE" "$WORK/$1/final.h5" "$WORK/$2/final.h5" --exact; fail "$2: parameters differ from $1"; }
  diff <(records "$WORK/$1/metrics.jsonl") <(records "$WORK/$2/metrics.jsonl") ||
    fail "$2: metrics.jsonl records differ from $1"
}

gpt=(--config "$SOURCE_DIR/launch/configs/shakespeare_gpt.ini" --data.train "$corpus/train.h5"
     --data.test "$corpus/val.h5" --max_steps 40 --eval_every 20 --eval_windows 120 --log_every 10
     --checkpoint.every_steps 20 --reduction invariant --threads 1 --progress off)
"$MIRRORED" train "${gpt[@]}" --out "$WORK/g1" > "$WORK/g1.log" 2>&1 || { cat "$WORK/g1.log"; fail "gpt at world 1"; }
grep -q "reduction = invariant: 6 virtual replica(s) of 2 sample(s), 6 per rank" "$WORK/g1.log" ||
  { cat "$WORK/g1.log"; fail "the start-up line does not describe the virtual replicas"; }
[[ $(grep -c '"kind": "eval"' "$WORK/g1/metrics.jsonl") -eq 2 ]] || fail "expected 2 eval records"
grep '"kind": "train"' "$WORK/g1/metrics.jsonl" | grep -q '"grad_norm": ' || fail "train records lack grad_norm"
for np in 2 3 4 6; do
  mpirun_np $np train "${gpt[@]}" --out "$WORK/g$np" > /dev/null
  same_run g1 g$np
done
echo "ok: the gpt recipe at world 1, 2, 3, 4 and 6: bit-identical parameters, losses, grad norms, evaluations"

# Fast mode at world 3 ends elsewhere: the comparison above can fail.
fast=("${gpt[@]}" --reduction fast --checkpoint.every_steps 0)
mpirun_np 3 train "${fast[@]}" --out "$WORK/f3" > /dev/null
"$MIRRORED" train "${fast[@]}" --out "$WORK/f1" > /dev/null
if "$COMPARE" "$WORK/f1/final.h5" "$WORK/f3/final.h5" --exact > /dev/null; then
  echo "note: fast mode happened to agree bitwise at world 1 and 3 on this CPU"
fi

mlp=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1 --max_steps 30
     --model.hidden 64,32 --lr 0.05 --momentum 0.9 --seed 3 --eval_every 15 --log_every 5 --reduction invariant
     --progress off)
"$MIRRORED" train "${mlp[@]}" --threads 1 --out "$WORK/m1t1" > /dev/null
for run in "1 2" "3 1" "3 2" "4 1" "4 2"; do
  read -r np threads <<< "$run"
  mpirun_np "$np" train "${mlp[@]}" --threads "$threads" --out "$WORK/m${np}t$threads" > /dev/null
  same_run m1t1 "m${np}t$threads"
done
echo "ok: the mlp at 1, 3 and 4 ranks with 1 and 2 threads: bit-identical"

sharded=("${gpt[@]}" --optimizer.shard true)
mpirun_np 4 train "${sharded[@]}" --out "$WORK/s4" > /dev/null
mpirun_np 4 train "${sharded[@]}" --max_steps 20 --out "$WORK/resumed" > /dev/null
mpirun_np 3 train "${sharded[@]}" --out "$WORK/resumed" > "$WORK/resumed.log" 2>&1 ||
  { cat "$WORK/resumed.log"; fail "the resume at 3 ranks"; }
grep -q "resum" "$WORK/resumed.log" || { cat "$WORK/resumed.log"; fail "the second run did not resume"; }
same_run s4 resumed
same_run g1 s4  # sharding moves where the update is computed, not its bits
echo "ok: sharded AdamW with clipping, 4 ranks resumed at 3 = the straight run = world 1, bitwise"

bf16=("${gpt[@]}" --precision bf16 --max_steps 20 --checkpoint.every_steps 0)
"$MIRRORED" train "${bf16[@]}" --out "$WORK/b1" > /dev/null 2>&1
mpirun_np 3 train "${bf16[@]}" --out "$WORK/b3" > /dev/null 2>&1
same_run b1 b3
echo "ok: bf16 at world 1 and 3: bit-identical"

expect_exit 4 fast_resumed_as_invariant "reduction = fast, this run has reduction = invariant" 60 1 \
  train "${gpt[@]}" --resume "$WORK/f1/checkpoints" --max_steps 41 --out "$WORK/other"
expect_exit 2 sync_batchnorm "reduction = invariant with model.sync_batchnorm = true" 60 1 \
  train --config "$SOURCE_DIR/launch/configs/fmnist_cnn.ini" --data.train "$DATA_DIR/train.h5" \
  --data.test "$DATA_DIR/test.h5" --reduction invariant --out "$WORK/bn"
expect_exit 2 world_above_shards "reduction.shards) cannot run on 3 ranks" 60 3 \
  train "${mlp[@]}" --reduction.shards 2 --out "$WORK/toofew"
expect_exit 2 shards_not_dividing "reduction.shards = 5 does not divide batch_size (global) 64" 60 1 \
  train "${mlp[@]}" --reduction.shards 5 --out "$WORK/five"
