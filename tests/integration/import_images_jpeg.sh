#!/usr/bin/env bash
# data import-images on a folder of JPEG files written by tests/tools/make_jpeg (TurboJPEG):
# RGB files of odd sizes, a grayscale file among colour ones, a truncated file, a file that
# is not an image, an empty class folder, symbolic links (a file and a class folder) and a
# file of another kind. The readable images are imported, the others counted and named,
# the links not followed; --strict fails naming the first bad file; --channels 1, a
# validation fraction and shards give the shapes and counts they should. The resnet trains
# on the imported RGB images with no shape in its configuration; a data.shape that
# disagrees with them is an error naming both.
source "$(dirname "$0")/lib.sh"
: "${MAKE_JPEG:?MAKE_JPEG must point at tests/tools/make_jpeg}"
root=$WORK/photos
mkdir -p "$root/cat" "$root/dog" "$root/empty"
"$MAKE_JPEG" "$root/cat" c 6 41 29 3 90 1      # 6 colour 41x29
"$MAKE_JPEG" "$root/cat" gray 1 35 35 1 90 2   # a grayscale file among them
"$MAKE_JPEG" "$root/dog" d 5 33 47 3 85 3      # 5 colour 33x47
"$MAKE_JPEG" "$WORK" whole 1 128 128 3 90 4
whole=$WORK/whole-00000.jpg
head -c $(($(stat -c %s "$whole") / 2)) "$whole" > "$root/cat/trunc.jpg"   # cut short half way
echo "not an image" > "$root/cat/fake.jpg"
ln -s c-00001.jpg "$root/cat/link.jpg"
ln -s dog "$root/bird"
echo "notes" > "$root/dog/readme.txt"

import() {  # import NAME ARGS...
  local name=$1; shift
  "$MIRRORED" data import-images --root "$root" --out "$WORK/$name" --threads 2 "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "import $name failed"; }
}
expect_line() {  # expect_line LOG TEXT
  grep -qF -- "$2" "$1" || { cat "$1"; fail "$(basename "$1"): no line with '$2'"; }
}

import rgb --size 24,24
cat "$WORK/rgb.log"
expect_line "$WORK/rgb.log" "found 3 classes in '$root', images stored as [3, 24, 24] (C, H, W)"
expect_line "$WORK/rgb.log" "wrote 12 training samples to $WORK/rgb/train.h5"
expect_line "$WORK/rgb.log" "2 file(s) could not be read and were left out:"
expect_line "$WORK/rgb.log" "$root/cat/fake.jpg: not a JPEG or PNG file"
expect_line "$WORK/rgb.log" "$root/cat/trunc.jpg: corrupt JPEG data"
expect_line "$WORK/rgb.log" "skipped 3 entries that are not image files (2 symbolic links, not followed)"
expect_line "$WORK/rgb.log" "bird: symbolic link, not followed"
expect_line "$WORK/rgb.log" "cat/link.jpg: symbolic link, not followed"
expect_line "$WORK/rgb.log" "dog/readme.txt: not .jpg, .jpeg or .png"
expect_line "$WORK/rgb.log" "class folder 'empty' holds no image (its label is kept)"
expect_line "$WORK/rgb.log" "decoded 14 images in"
"$MIRRORED" data inspect "$WORK/rgb/train.h5" > "$WORK/inspect.log"
expect_line "$WORK/inspect.log" "sample shape [3, 24, 24] (C, H, W)"
expect_line "$WORK/inspect.log" "num_classes  3"
grep -qE '^0 +7 .* cat$' "$WORK/inspect.log" && grep -qE '^1 +5 .* dog$' "$WORK/inspect.log" &&
  grep -qE '^2 +0 .* empty$' "$WORK/inspect.log" || { cat "$WORK/inspect.log"; fail "labels or class names wrong"; }
echo "ok: 12 of 14 JPEG files imported, 2 named as unreadable, 3 entries skipped, links not followed"

import gray --size 20,16 --channels 1 --val_fraction 0.2
expect_line "$WORK/gray.log" "images stored as [1, 20, 16] (C, H, W)"
# 20% of each class's files held out, chosen by a hash of the path (cat: 2 of its 9, which
# may include the 2 unreadable ones; dog: 1 of 5): 12 readable samples between the two.
train=$(sed -nE 's/^wrote ([0-9]+) training samples.*/\1/p' "$WORK/gray.log")
val=$(sed -nE 's/^wrote ([0-9]+) validation samples.*/\1/p' "$WORK/gray.log")
((train + val == 12 && val >= 1 && val <= 3)) || { cat "$WORK/gray.log"; fail "split $train + $val, expected 12 with 1-3 held out"; }
echo "ok: --channels 1 --val_fraction 0.2: $train training and $val validation samples of [1, 20, 16]"

import shards --size 256,256 --shard_mb 1
expect_line "$WORK/shards.log" "wrote 12 training samples in 3 shards"
"$MIRRORED" data inspect "$WORK/shards/train-*-of-00003.h5" > "$WORK/inspect-shards.log"
expect_line "$WORK/inspect-shards.log" "samples      12"
for shard in "$WORK"/shards/train-*-of-00003.h5; do
  (($(stat -c %s "$shard") <= 1 << 20)) || fail "$shard is larger than --shard_mb 1"
done
echo "ok: --shard_mb 1 wrote 3 shards read back as one set of 12"

status=0
"$MIRRORED" data import-images --root "$root" --out "$WORK/strict" --size 24,24 --strict > "$WORK/strict.log" 2>&1 ||
  status=$?
((status == 3)) || { cat "$WORK/strict.log"; fail "--strict exited $status, expected 3 (bad input)"; }
expect_line "$WORK/strict.log" "'$root/cat/fake.jpg': not a JPEG or PNG file"
[[ ! -e "$WORK/strict/train.h5" ]] || fail "--strict left a train.h5 behind"
echo "ok: --strict fails naming $root/cat/fake.jpg"

# The image models take their input shape from the data: the resnet's configuration
# (written for 28x28 gray Fashion-MNIST) trains on 32x32 RGB images with only the data
# paths changed; a data.shape that disagrees with the data is an error naming both.
rm "$root/bird" "$root/cat/link.jpg" "$root/cat/trunc.jpg" "$root/cat/fake.jpg" "$root/dog/readme.txt"
rmdir "$root/empty"
import rgb32 --size 32,32 --val_fraction 0.25
resnet=(train --config "$SOURCE_DIR/launch/configs/fmnist_resnet.ini" --data.train "$WORK/rgb32/train.h5"
        --data.test "$WORK/rgb32/val.h5" --resnet.channels 4,8,8 --batch_size 4 --max_steps 3 --progress off
        --threads 1)
mpirun_np 2 "${resnet[@]}" --out "$WORK/resnet" > "$WORK/resnet.log" 2>&1 ||
  { cat "$WORK/resnet.log"; fail "the resnet did not train on the imported 32x32 RGB images"; }
grep -q '"kind": "eval"' "$WORK/resnet/metrics.jsonl" || { cat "$WORK/resnet.log"; fail "no evaluation record"; }
echo "ok: the resnet trains on imported [3, 32, 32] images with the Fashion-MNIST configuration"
expect_exit 2 shape_mismatch "data.shape is [1, 28, 28] but data.train '$WORK/rgb32/train.h5' holds samples of shape [3, 32, 32]" \
  60 2 "${resnet[@]}" --data.shape 1,28,28 --out "$WORK/mismatch"
