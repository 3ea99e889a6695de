#!/usr/bin/env bash
# TensorBoard round trip: a 2-rank run writes RUN/tensorboard/events.out.tfevents.*; the
# tensorboard package's own reader must load it and see the same values as metrics.jsonl.
source "$(dirname "$0")/lib.sh"
require_data
if ! python3 -c 'import tensorboard' 2>/dev/null; then
  echo "installing tensorboard from PyPI for its event-file reader"
  python3 -m pip install --quiet --disable-pip-version-check tensorboard >"$WORK/pip.log" 2>&1 || {
    tail -5 "$WORK/pip.log"
    echo "SKIP: tensorboard is not installed and pip could not install it (no network to PyPI?)"
    exit 77
  }
fi
mpirun_np 2 train --config "$SOURCE_DIR/launch/configs/fmnist_mlp.ini" --data.train "$DATA_DIR/train.h5" \
  --data.test "$DATA_DIR/test.h5" --epochs 2 --max_steps 700 --log_every 100 --threads 1 --out "$WORK/run" \
  >"$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; fail "training failed"; }
files=("$WORK"/run/tensorboard/events.out.tfevents.*)
[[ ${#files[@]} == 1 && -s ${files[0]} ]] || fail "expected one event file, found: ${files[*]}"
python3 "$SOURCE_DIR/tests/integration/check_tensorboard.py" "$WORK/run/tensorboard" "$WORK/run/metrics.jsonl"

# A language model's run: val/loss, val/perplexity, val/bits_per_byte and train/tokens_per_sec.
"$MIRRORED" data import-text --out "$WORK/corpus" "${DOCS_TEXT[@]}" > /dev/null
mpirun_np 2 train --model gpt --data.train "$WORK/corpus/train.h5" --data.test "$WORK/corpus/val.h5" --gpt.layers 1 \
  --gpt.heads 2 --gpt.width 16 --gpt.context 16 --batch_size 8 --optimizer adamw --lr 3e-3 --max_steps 40 \
  --eval_every 20 --log_every 5 --threads 1 --out "$WORK/gpt" >"$WORK/gpt.log" 2>&1 || { cat "$WORK/gpt.log"; fail "gpt training failed"; }
python3 "$SOURCE_DIR/tests/integration/check_tensorboard.py" "$WORK/gpt/tensorboard" "$WORK/gpt/metrics.jsonl"
