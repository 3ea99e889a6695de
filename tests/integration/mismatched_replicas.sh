#!/usr/bin/env bash
# Replicas started differently stop at once, naming the first rank that differs and what:
# an MPMD launch whose rank 1 has another model.hidden (a parameter shape), and one whose
# rank 2 of 3 has another precision. Without the check the parameter broadcast would
# mismatch or hang until the collective timeout.
source "$(dirname "$0")/lib.sh"
require_data
base=(train --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --epochs 1 --max_steps 2
      --model mlp --batch_size 96 --collective_timeout_s 60)
mpmd() {  # mpmd NAME TEXT ARGS_OF_THE_LAST_RANK... : ranks 0..N-2 run $base, the last adds its args
  local name=$1 text=$2 ranks=$3; shift 3
  local start=$SECONDS status=0
  timeout -k 5 90 mpirun --allow-run-as-root --oversubscribe --bind-to none \
    -np "$((ranks - 1))" "$MIRRORED" "${base[@]}" --out "$WORK/$name" : \
    -np 1 "$MIRRORED" "${base[@]}" --out "$WORK/$name" "$@" >"$WORK/$name.out" 2>&1 || status=$?
  local took=$((SECONDS - start))
  [[ $status -eq 2 ]] || { cat "$WORK/$name.out"; fail "$name: exit status $status, expected 2"; }
  grep -qF -- "$text" "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "$name: message lacks '$text'"; }
  ((took <= 30)) || fail "$name: took $took s (limit 30 s)"
}
mpmd hidden "rank 1 differs from rank 0 in parameter 0." 2 --model.hidden 64
grep -qF "weight: 'shape [256,784] at 0' on the chief vs 'shape [64,784] at 0'" "$WORK/hidden.out" ||
  { cat "$WORK/hidden.out"; fail "hidden: the shapes are not named"; }
mpmd precision "rank 2 differs from rank 0 in precision: 'fp32' on the chief vs 'bf16'" 3 --precision bf16
echo "PASS: mismatched replicas are named within seconds"
