#!/usr/bin/env bash
# grad_clip: the averaged gradient is clipped after the all-reduce, so every replica scales
# by the same factor and the world-size contract still holds with clipping on; the clip
# changes training (max_norm well below the gradient's norm), and grad_norm is logged.
source "$(dirname "$0")/lib.sh"
require_data
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1
        --max_steps 40 --model.hidden 64,32 --lr 0.05 --momentum 0.9 --seed 3 --threads 1 --log_every 10 --quiet)
"$MIRRORED" train "${common[@]}" --grad_clip 0.2 --out "$WORK/w1"
mpirun_np 2 train "${common[@]}" --grad_clip 0.2 --out "$WORK/w2"
mpirun_np 4 train "${common[@]}" --grad_clip 0.2 --out "$WORK/w4"
# Tolerance as in world_size_equivalence.sh: float summation order only.
"$COMPARE" "$WORK/w1/final.h5" "$WORK/w2/final.h5" --rtol 1e-5
"$COMPARE" "$WORK/w1/final.h5" "$WORK/w4/final.h5" --rtol 1e-5
"$MIRRORED" train "${common[@]}" --out "$WORK/unclipped"
if "$COMPARE" "$WORK/w1/final.h5" "$WORK/unclipped/final.h5" --rtol 1e-2 > /dev/null; then
  fail "grad_clip 0.2 ended where training without clipping did"
fi
norm=$(json_field "$WORK/w1/metrics.jsonl" train grad_norm)
awk -v n="$norm" 'BEGIN { exit !(n > 0.2) }' || fail "grad_norm '$norm' in metrics.jsonl: expected the pre-clip norm, > 0.2"
grep -q grad_norm "$WORK/unclipped/metrics.jsonl" && fail "grad_norm logged without grad_clip"
echo "ok: grad_clip keeps world 1, 2 and 4 in agreement (last pre-clip norm $norm)"
