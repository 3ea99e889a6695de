#!/usr/bin/env bash
# Bad input for the language model: a clear message naming the file or the keys, a non-zero
# exit on every rank, fast. Small files written here; no download.
source "$(dirname "$0")/lib.sh"
: > "$WORK/empty.txt"
head -c 100 "$SOURCE_DIR/README.md" > "$WORK/short.txt"
"$MIRRORED" data import-text --out "$WORK/short" "$WORK/short.txt" > /dev/null  # 90 training tokens
"$MIRRORED" data import-text --out "$WORK/corpus" "${DOCS_TEXT[@]}" > /dev/null
"$MAKE_BAD_DATASET" token_beyond_vocab "$WORK/beyond_vocab.h5"
base=(train --model gpt --gpt.layers 1 --gpt.heads 2 --gpt.width 16 --gpt.context 16 --batch_size 4 --max_steps 2
      --threads 1 --out "$WORK/run")
corpus=(--data.train "$WORK/corpus/train.h5" --data.test "$WORK/corpus/val.h5")

expect_failure empty_text_file "'$WORK/empty.txt': the text file is empty" 20 \
  1 data import-text --out "$WORK/empty" "$WORK/empty.txt"
expect_failure token_beyond_vocabulary "data.train: '$WORK/beyond_vocab.h5': /tokens[500] = 200 is outside the vocabulary [0, 64)" 20 \
  2 "${base[@]}" --data.train "$WORK/beyond_vocab.h5" --data.test "$WORK/corpus/val.h5"
expect_exit 2 context_longer_than_data "data.train: '$WORK/short/train.h5': context 128 is longer than the data" 20 \
  2 "${base[@]}" --data.train "$WORK/short/train.h5" --data.test "$WORK/corpus/val.h5" --gpt.context 128
expect_exit 2 context_longer_than_validation "data.test: '$WORK/short/val.h5': context 16 is longer than the data" 20 \
  2 "${base[@]}" --data.train "$WORK/corpus/train.h5" --data.test "$WORK/short/val.h5"
expect_exit 2 width_not_divisible_by_heads "gpt.width = 130 is not divisible by gpt.heads = 4" 20 \
  2 "${base[@]}" "${corpus[@]}" --gpt.width 130 --gpt.heads 4
expect_exit 2 generate_without_config "generate: '$WORK/corpus/train.h5' is a parameter file and" 20 \
  1 generate --checkpoint "$WORK/corpus/train.h5"
