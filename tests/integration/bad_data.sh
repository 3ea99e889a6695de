#!/usr/bin/env bash
# Bad data files under mpirun -np 2: each gets a message naming the file and what was
# expected, exit status 3 (bad input) on every rank, within seconds.
source "$(dirname "$0")/lib.sh"
require_data
: "${MAKE_BAD_DATASET:?MAKE_BAD_DATASET must point at the make_bad_dataset tool}"
for kind in missing_images missing_labels wrong_rank length_mismatch label_out_of_range nan_image float_labels \
            empty tiny; do
  "$MAKE_BAD_DATASET" "$kind" "$WORK/$kind.h5"
done
head -c 20000 "$DATA_DIR/test.h5" > "$WORK/truncated.h5"
echo "not HDF5 at all" > "$WORK/text.h5"
mkdir "$WORK/a_directory.h5"
base=(--data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1 --max_steps 2 --model.hidden 16 --threads 1)
bad() {  # bad NAME EXPECTED_TEXT TRAIN_FILE [CODE]
  expect_exit "${4:-3}" "$1" "$2" 15 2 train "${base[@]}" --out "$WORK/run_$1" --data.train "$3"
}
bad missing_file "cannot open '$WORK/nope.h5': file does not exist" "$WORK/nope.h5"
bad directory "it is a directory, not a file" "$WORK/a_directory.h5"
bad not_hdf5 "'$WORK/text.h5' is not an HDF5 file" "$WORK/text.h5"
bad truncated "$WORK/truncated.h5" "$WORK/truncated.h5"
bad missing_images "dataset /images is missing (expected uint8 or float32 images" "$WORK/missing_images.h5"
bad missing_labels "dataset /labels is missing (expected integer labels [N])" "$WORK/missing_labels.h5"
bad wrong_rank "/images has shape [200, 784], expected [N, H, W] or [N, C, H, W]" "$WORK/wrong_rank.h5"
bad length_mismatch "/images holds 200 samples but /labels holds 199; expected equal lengths" \
  "$WORK/length_mismatch.h5"
bad label_out_of_range "/labels[42] = 12 is outside [0, 10)" "$WORK/label_out_of_range.h5"
bad nan_image "/images contains NaN at sample 17" "$WORK/nan_image.h5"
bad float_labels "/labels holds float values, expected integers" "$WORK/float_labels.h5"
bad empty "dataset is empty" "$WORK/empty.h5"
bad fewer_than_one_batch "data.train '$WORK/tiny.h5': batch_size (global) 64 is too large: the dataset has only 10" \
  "$WORK/tiny.h5" 2
# A bad test set is caught before any training.
expect_exit 3 bad_test_set "$WORK/nan_image.h5" 15 2 train --data.train "$DATA_DIR/test.h5" \
  --data.test "$WORK/nan_image.h5" --max_steps 2 --threads 1 --out "$WORK/run_test_set"
