#!/usr/bin/env bash
# Fashion-MNIST as a folder of PNG files (the first 2,000 training and 500 test images, one
# subfolder per label, written by tests/tools/idx_to_png_folder.py), imported with
# data import-images: pixels and labels equal import-idx's of the same images bit for bit,
# and the cnn trained from the imported folder (launch/configs/fmnist_cnn.ini, 8 epochs of the
# 2,000 images: 125 steps on 2 ranks) reaches cnn_accuracy's threshold, 0.80 (measured 0.852;
# 5 epochs gave 0.822, too close to it).
source "$(dirname "$0")/lib.sh"
src=${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}
[[ -s "$src/train-images-idx3-ubyte.gz" ]] || { echo "SKIP: no Fashion-MNIST IDX files in $src"; exit 77; }
start=$SECONDS
to_png=$SOURCE_DIR/tests/tools/idx_to_png_folder.py
python3 "$to_png" "$src/train-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" 2000 "$WORK/png/train" \
  "$WORK/train-images.gz" "$WORK/train-labels.gz"
python3 "$to_png" "$src/t10k-images-idx3-ubyte.gz" "$src/t10k-labels-idx1-ubyte.gz" 500 "$WORK/png/test" \
  "$WORK/test-images.gz" "$WORK/test-labels.gz"

"$MIRRORED" data import-images --root "$WORK/png/train" --val "$WORK/png/test" --out "$WORK/imported" \
  --channels 1 --size 28,28 > "$WORK/import.log" 2>&1 || { cat "$WORK/import.log"; fail "import-images failed"; }
cat "$WORK/import.log"
grep -q "wrote 2000 training samples to $WORK/imported/train.h5" "$WORK/import.log" || fail "expected 2000 training samples"
grep -q "wrote 500 validation samples to $WORK/imported/val.h5" "$WORK/import.log" || fail "expected 500 validation samples"
for split in train test; do
  "$MIRRORED" data import-idx --images "$WORK/$split-images.gz" --labels "$WORK/$split-labels.gz" \
    --out "$WORK/idx-$split.h5" > /dev/null
done
for pair in "train.h5 idx-train.h5" "val.h5 idx-test.h5"; do
  set -- $pair
  for dataset in /images /labels; do
    h5diff "$WORK/imported/$1" "$WORK/$2" "$dataset" "$dataset" ||
      fail "$dataset of the PNG import ($1) differs from import-idx's ($2)"
  done
done
echo "ok: PNG folder import equals import-idx's pixels and labels bit for bit"
"$MIRRORED" data inspect "$WORK/imported/train.h5" > "$WORK/inspect.log"
grep -qE '^9 +[0-9]+ +[0-9.]+ +9$' "$WORK/inspect.log" || { cat "$WORK/inspect.log"; fail "class names not kept"; }

mpirun_np 2 train --config "$SOURCE_DIR/launch/configs/fmnist_cnn.ini" --data.train "$WORK/imported/train.h5" \
  --data.test "$WORK/imported/val.h5" --threads 1 --epochs 8 --progress off --out "$WORK/cnn" \
  > "$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; fail "training from the imported folder failed"; }
accuracy=$(json_field "$WORK/cnn/metrics.jsonl" eval test_accuracy)
echo "test accuracy of the cnn trained from the PNG folder: $accuracy ($((SECONDS - start)) s in all)"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.80) }' || fail "cnn test accuracy $accuracy < 0.80 (cnn_accuracy's threshold)"
