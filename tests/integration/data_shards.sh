#!/usr/bin/env bash
# A dataset split into 4 shards trains bit-identically to the same data in one file:
# Fashion-MNIST's training IDX files imported whole and as 4 shards (import-idx
# --shard_mb 12: 45 MiB of samples), then 20 steps of the cnn on 2 ranks from the one file,
# from the shards' glob loaded whole, and from the shards through a 4 MiB block cache: the
# same model (final.h5 parameters exactly) and the same records each time.
source "$(dirname "$0")/lib.sh"
require_data
src=${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}
[[ -s "$src/train-images-idx3-ubyte.gz" ]] || { echo "SKIP: no Fashion-MNIST IDX files in $src"; exit 77; }
start=$SECONDS
mkdir -p "$WORK/shards"
"$MIRRORED" data import-idx --images "$src/train-images-idx3-ubyte.gz" --labels "$src/train-labels-idx1-ubyte.gz" \
  --out "$WORK/shards/train.h5" --shard_mb 12 > "$WORK/import.log" 2>&1 || { cat "$WORK/import.log"; fail "import-idx --shard_mb failed"; }
grep -q "in 4 shards" "$WORK/import.log" || { cat "$WORK/import.log"; fail "expected 4 shards"; }
shards=("$WORK"/shards/train-*-of-00004.h5)
((${#shards[@]} == 4)) || fail "expected 4 shard files, found ${#shards[@]}"
for shard in "${shards[@]}"; do
  size=$(stat -c %s "$shard")
  ((size <= 12 << 20)) || fail "$shard holds $size bytes, more than --shard_mb 12"
done

run() {  # run NAME TRAIN_SPEC CACHE_MB
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train \
    --config "$SOURCE_DIR/launch/configs/fmnist_cnn.ini" --data.train "$2" --data.test "$DATA_DIR/test.h5" \
    --data.cache_mb "$3" --batch_size 32 --epochs 1 --max_steps 20 --eval_every 10 --seed 3 --threads 1 \
    --progress off --out "$WORK/$1" > "$WORK/$1.log" 2>&1 || { cat "$WORK/$1.log"; fail "training $1 failed"; }
}
run whole "$DATA_DIR/train.h5" 0
run shards "$WORK/shards/train-*-of-00004.h5" 0
run listed "$(IFS=,; echo "${shards[*]}")" 0
run cached "$WORK/shards/train-*-of-00004.h5" 4
grep -q "read in blocks through a 4.0 MiB cache" "$WORK/cached.log" ||
  { cat "$WORK/cached.log"; fail "the sharded set was not read through the cache"; }
for name in shards listed cached; do
  "$COMPARE" "$WORK/$name/final.h5" "$WORK/whole/final.h5" --exact ||
    fail "the model trained from the shards ($name) differs from the one trained from one file"
  diff <(without_timings "$WORK/$name/metrics.jsonl") <(without_timings "$WORK/whole/metrics.jsonl") ||
    fail "the records of the $name run differ"
done
"$MIRRORED" data inspect "$WORK/shards/train-*-of-00004.h5" > "$WORK/inspect.log" 2>&1 ||
  { cat "$WORK/inspect.log"; fail "data inspect of the shards' glob failed"; }
grep -q "60000" "$WORK/inspect.log" || { cat "$WORK/inspect.log"; fail "data inspect does not count the 4 shards' samples"; }
echo "ok: 4 shards (glob, list, through a 4 MiB cache) train to the model of the one file, bit for bit," \
  "$((SECONDS - start)) s"
