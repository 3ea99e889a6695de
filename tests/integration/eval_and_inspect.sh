#!/usr/bin/env bash
# `mirrored eval` reproduces the trainer's own final evaluation from final.h5 and the
# run's config.ini (data-parallel, 2 ranks and 1), and fails clearly on bad input;
# `mirrored data inspect` lists the datasets and the label histogram.
source "$(dirname "$0")/lib.sh"
require_data
mpirun_np 2 train --config "$SOURCE_DIR/launch/configs/fmnist_mlp.ini" --data.train "$DATA_DIR/train.h5" \
  --data.test "$DATA_DIR/test.h5" --epochs 1 --max_steps 200 --threads 1 --model.hidden 64 --out "$WORK/run" \
  >"$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; fail "training failed"; }
trained_acc=$(json_field "$WORK/run/metrics.jsonl" eval test_accuracy)
trained_loss=$(json_field "$WORK/run/metrics.jsonl" eval test_loss)

# Same world size and batch as the trainer's evaluation: the same numbers.
mpirun_np 2 eval --checkpoint "$WORK/run/final.h5" --data "$DATA_DIR/test.h5" --json >"$WORK/eval2.out" 2>&1 ||
  { cat "$WORK/eval2.out"; fail "eval on 2 ranks failed"; }
cat "$WORK/eval2.out"
acc2=$(json_field "$WORK/eval2.out" eval test_accuracy)
loss2=$(json_field "$WORK/eval2.out" eval test_loss)
[[ $(json_field "$WORK/eval2.out" eval test_samples) == 10000 ]] || fail "eval did not score all 10000 samples once"
[[ "$acc2" == "$trained_acc" ]] || fail "eval accuracy $acc2 != trainer's $trained_acc"
awk -v a="$loss2" -v b="$trained_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * b) }' ||
  fail "eval loss $loss2 != trainer's $trained_loss"
# One process, another batch, an explicit --config: the same model, so the same accuracy
# up to float summation order in the logits.
"$MIRRORED" eval --checkpoint "$WORK/run/final.h5" --config "$WORK/run/config.ini" --data "$DATA_DIR/test.h5" \
  --batch 250 >"$WORK/eval1.out" 2>&1 || { cat "$WORK/eval1.out"; fail "eval on 1 process failed"; }
cat "$WORK/eval1.out"
acc1=$(sed -E 's/^accuracy ([0-9.]+) .*/\1/' "$WORK/eval1.out")
awk -v a="$acc1" -v b="$trained_acc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.0005) }' ||
  fail "1-process eval accuracy $acc1 far from $trained_acc"
echo "ok: eval reproduces the trainer's evaluation ($acc2)"

# A model with buffers (batch norm's running statistics), given as its run directory: every
# rank evaluates with the saved statistics, so 2 ranks give the trainer's digits.
"$MIRRORED" train --model cnn --cnn.channels 4 --cnn.fc 16 --cnn.batchnorm true --data.train "$DATA_DIR/train.h5" \
  --data.test "$DATA_DIR/test.h5" --epochs 1 --max_steps 30 --threads 1 --quiet --out "$WORK/bn" >"$WORK/bn.log" 2>&1 ||
  { cat "$WORK/bn.log"; fail "training the batch norm cnn failed"; }
mpirun_np 2 eval --checkpoint "$WORK/bn" --data "$DATA_DIR/test.h5" --json >"$WORK/bn_eval.out" 2>&1 ||
  { cat "$WORK/bn_eval.out"; fail "eval of a run directory failed"; }
for key in test_loss test_accuracy; do
  [[ $(json_field "$WORK/bn_eval.out" eval $key) == $(json_field "$WORK/bn/metrics.jsonl" eval $key) ]] ||
    { cat "$WORK/bn_eval.out"; fail "batch norm cnn: eval $key differs from the trainer's"; }
done
echo "ok: eval of a batch norm cnn's run directory on 2 ranks: $(json_field "$WORK/bn_eval.out" eval test_loss)"

# Bad input: no config next to the checkpoint (2), a missing checkpoint (4), a model that
# does not match the parameters (3, naming the parameter).
cp "$WORK/run/final.h5" "$WORK/lonely.h5"
expect_failure no_config "config.ini' does not exist" 30 1 eval --checkpoint "$WORK/lonely.h5" --data "$DATA_DIR/test.h5"
expect_failure missing_ckpt "does not exist" 30 1 eval --checkpoint "$WORK/run/nope.h5" --data "$DATA_DIR/test.h5" \
  --config "$WORK/run/config.ini"
sed 's/^hidden = 64$/hidden = 32/' "$WORK/run/config.ini" >"$WORK/other.ini"
expect_exit 4 wrong_model "eval: '$WORK/run/final.h5' holds an mlp model (hidden 64); --config '$WORK/other.ini' builds an mlp (hidden 32)" \
  30 2 eval --checkpoint "$WORK/run/final.h5" --config "$WORK/other.ini" --data "$DATA_DIR/test.h5"
# The same parameters without the config.ini beside them record no model: the tensors are
# compared, and the first that does not fit is named, with the same exit code.
mkdir -p "$WORK/bare" && cp "$WORK/run/final.h5" "$WORK/bare/params.h5"
expect_exit 4 wrong_model_unrecorded "0.linear.weight" 30 2 eval --checkpoint "$WORK/bare/params.h5" \
  --config "$WORK/other.ini" --data "$DATA_DIR/test.h5"
status=0; "$MIRRORED" eval --checkpoint "$WORK/lonely.h5" --data "$DATA_DIR/test.h5" >/dev/null 2>&1 || status=$?
[[ $status == 2 ]] || fail "missing config: exit $status, expected 2"
status=0; "$MIRRORED" eval --checkpoint "$WORK/run/nope.h5" --config "$WORK/run/config.ini" --data "$DATA_DIR/test.h5" \
  >/dev/null 2>&1 || status=$?
[[ $status == 4 ]] || fail "missing checkpoint: exit $status, expected 4"

# data inspect
"$MIRRORED" data inspect "$DATA_DIR/train.h5" >"$WORK/inspect.out" 2>&1 || { cat "$WORK/inspect.out"; fail "inspect failed"; }
cat "$WORK/inspect.out"
grep -qE '^  /images  uint8  \[60000, 28, 28\]$' "$WORK/inspect.out" || fail "inspect: /images row"
grep -qE '^  /labels  uint8  \[60000\]$' "$WORK/inspect.out" || fail "inspect: /labels row"
grep -qE '^sample shape \[1, 28, 28\]' "$WORK/inspect.out" || fail "inspect: sample shape"
grep -qE '^num_classes  10$' "$WORK/inspect.out" || fail "inspect: num_classes"
[[ $(grep -cE '^[0-9] +6000 +0\.1000$' "$WORK/inspect.out") == 10 ]] || fail "inspect: Fashion-MNIST has 6000 of each class"
head -c 1000 "$DATA_DIR/test.h5" >"$WORK/truncated.h5"
status=0; "$MIRRORED" data inspect "$WORK/truncated.h5" >"$WORK/bad.out" 2>&1 || status=$?
[[ $status == 3 ]] || { cat "$WORK/bad.out"; fail "inspect of a truncated file: exit $status, expected 3"; }
echo "ok: data inspect"
