#!/usr/bin/env bash
# Rank-0 progress in both modes. stderr to a file: one plain line per log point and no
# carriage returns; on a pseudo-terminal: a bar redrawn in place, ending at N/N.
# Plus --quiet (the final line only) and --verbose (the model summary).
source "$(dirname "$0")/lib.sh"
require_data
common=(train --config "$SOURCE_DIR/launch/configs/fmnist_mlp.ini" --data.train "$DATA_DIR/train.h5"
        --data.test "$DATA_DIR/test.h5" --epochs 1 --max_steps 120 --log_every 50 --threads 1 --launch local)

# Plain: stderr is a file.
"$MIRRORED" "${common[@]}" --out "$WORK/plain" >"$WORK/plain.out" 2>"$WORK/plain.err"
cat "$WORK/plain.err"
! grep -q $'\r' "$WORK/plain.err" || fail "plain mode wrote carriage returns"
[[ $(grep -cE '^epoch 1/1  step (50|100|120)/120  \((50|100|120)/120\)  loss [0-9.]+  lr 0.05  [0-9]+ samples/s  run ETA [0-9]+:[0-9]{2}$' "$WORK/plain.err") == 3 ]] ||
  fail "plain mode: expected 3 progress lines (steps 50, 100, 120)"
[[ $(wc -l <"$WORK/plain.err") == 3 ]] || fail "plain mode: stray lines on stderr"
grep -q '^final test accuracy: ' "$WORK/plain.out" || fail "no final line on stdout"
grep -q '^epoch 1/1  loss ' "$WORK/plain.out" || fail "no epoch summary on stdout"
echo "ok: plain lines"

# Bar: every stream a terminal.
python3 "$SOURCE_DIR/tests/integration/pty_run.py" "$WORK/bar.tty" 120 "$MIRRORED" "${common[@]}" --out "$WORK/bar" ||
  fail "training on a pseudo-terminal failed"
crs=$(tr -cd '\r' <"$WORK/bar.tty" | wc -c)
# Bars are redrawn at most every 0.1 s, so a short run has few; the last one must be full.
grep -aqE $'\repoch 1/1 \\[=+>? *\\] [0-9]+/120  [0-9.]+k? samples/s  loss [0-9.]+  ETA [0-9]+:[0-9]{2}' "$WORK/bar.tty" ||
  { cat -A "$WORK/bar.tty" | head -20; fail "no progress bar on the terminal"; }
grep -aqF $'\repoch 1/1 [==============================] 120/120' "$WORK/bar.tty" || fail "the bar did not end at 120/120"
! grep -aq '  step 50/120' "$WORK/bar.tty" || fail "plain lines printed on a terminal"
grep -aq 'final test accuracy: ' "$WORK/bar.tty" || fail "no final line on the terminal"
echo "ok: bar ($crs carriage returns)"

# --quiet: the final line and nothing else, on either stream.
"$MIRRORED" "${common[@]}" --quiet --out "$WORK/quiet" >"$WORK/quiet.out" 2>"$WORK/quiet.err"
[[ ! -s "$WORK/quiet.err" ]] || fail "--quiet wrote to stderr: $(cat "$WORK/quiet.err")"
[[ $(wc -l <"$WORK/quiet.out") == 1 ]] && grep -q '^final test accuracy: ' "$WORK/quiet.out" ||
  fail "--quiet printed more than the final line: $(cat "$WORK/quiet.out")"
echo "ok: quiet"

# --verbose: the model summary too; --quiet with --verbose is a usage error.
"$MIRRORED" "${common[@]}" --verbose --out "$WORK/verbose" >"$WORK/verbose.out" 2>"$WORK/verbose.err"
grep -qi 'linear' "$WORK/verbose.out" || fail "--verbose printed no model summary"
status=0
"$MIRRORED" "${common[@]}" --verbose --quiet >"$WORK/both.out" 2>&1 || status=$?
[[ $status == 2 ]] || fail "--quiet --verbose: exit $status, expected 2"
echo "ok: verbose"

# A language model counts tokens and step time, and names no epoch in a run shorter than
# one (this corpus has hundreds of windows per epoch; the run takes 20 steps).
"$MIRRORED" data import-text --out "$WORK/corpus" "${DOCS_TEXT[@]}" >/dev/null
"$MIRRORED" train --config "$SOURCE_DIR/launch/configs/shakespeare_gpt.ini" --data.train "$WORK/corpus/train.h5" \
  --data.test "$WORK/corpus/val.h5" --max_steps 20 --log_every 10 --eval_every 20 --eval_windows 20 --threads 1 \
  --progress plain --out "$WORK/lm" >"$WORK/lm.out" 2>"$WORK/lm.err" || { cat "$WORK/lm.err"; fail "the gpt run failed"; }
[[ $(grep -cE '^step (10|20)/20  loss [0-9.]+  lr [0-9.e-]+  [0-9]+ tokens/s  [0-9.]+ ms/step  run ETA [0-9]+:[0-9]{2}$' \
   "$WORK/lm.err") == 2 ]] || { cat "$WORK/lm.err"; fail "a language model's progress lines lack tokens/s and ms/step"; }
! grep -qE "^epoch |  epoch " "$WORK/lm.err" "$WORK/lm.out" || { cat "$WORK/lm.err" "$WORK/lm.out"; fail "a 20-step run named an epoch"; }
grep -qE '^final val_loss .*\(20 steps, [0-9]+ tokens/s over 1 replica' "$WORK/lm.out" ||
  { cat "$WORK/lm.out"; fail "the final line of a language model is not in tokens/s"; }
echo "ok: a language model shows tokens/s and ms/step, and no epoch in a run shorter than one"
