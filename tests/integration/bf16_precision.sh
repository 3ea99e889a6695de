#!/usr/bin/env bash
# precision = bf16 (bfloat16 inputs to every matrix product and convolution, float32
# accumulation, float32 everything else) keeps the strategy's contract and the accuracy:
#  - world 1, 2 and 4 agree (after 10 steps), and two runs at one world size are bit-identical;
#  - the cnn reaches the float32 run's test accuracy within 0.01 after the same steps;
#  - checkpoints hold float32 parameters whatever the precision, so a bf16 run resumes in
#    fp32 and an fp32 run in bf16.
source "$(dirname "$0")/lib.sh"
require_data

# World sizes: the mlp of world_size_equivalence.sh, in bf16.
common=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1
        --max_steps 60 --model.hidden 64,32 --lr 0.05 --momentum 0.9 --seed 3 --threads 1 --quiet
        --precision bf16)
"$MIRRORED" train "${common[@]}" --out "$WORK/w1"
mpirun_np 2 train "${common[@]}" --out "$WORK/w2"
mpirun_np 2 train "${common[@]}" --out "$WORK/w2again"
"$COMPARE" "$WORK/w2/final.h5" "$WORK/w2again/final.h5" --exact
# World sizes agree up to summation order, compared after 10 steps. In float32 the world
# sizes differ only by summation order (~6e-8 per rounding). In bf16 that difference can
# also move an activation across a bfloat16 rounding boundary (up to 2^-9 relative), and
# the products of different row counts may be blocked differently by the BLAS; each such
# flip feeds the next steps, so the gap grows with the run. Measured between world 1 and
# world 2 (this mlp, seed 3): on an AVX512-BF16 CPU (oneDNN) 3.4e-5 after 60 steps; on an
# AVX2-only AMD EPYC (emulated: rounded inputs, float32 OpenBLAS) 2.4e-6 after 10 steps,
# 9.2e-5 after 20, 7.9e-3 after 30, 4.8e-2 after 60. 3e-4 at 10 steps leaves 100x headroom
# on both and stays below what a real bug does (a wrong split or a missing average moves
# the parameters by > 1e-3 relative within a few steps).
ten=("${common[@]}" --max_steps 10)
"$MIRRORED" train "${ten[@]}" --out "$WORK/w1.10"
mpirun_np 2 train "${ten[@]}" --out "$WORK/w2.10"
mpirun_np 4 train "${ten[@]}" --out "$WORK/w4.10"
"$COMPARE" "$WORK/w1.10/final.h5" "$WORK/w2.10/final.h5" --rtol 3e-4
"$COMPARE" "$WORK/w1.10/final.h5" "$WORK/w4.10/final.h5" --rtol 3e-4
"$MIRRORED" train "${common[@]}" --precision fp32 --out "$WORK/w1.fp32"
if "$COMPARE" "$WORK/w1/final.h5" "$WORK/w1.fp32/final.h5" --exact > /dev/null 2>&1; then
  fail "precision = bf16 trained exactly the fp32 model"
fi
echo "ok: bf16 agrees at world 1, 2 and 4 and reruns bit-identically"

# The portable method (inputs rounded, float32 BLAS: what a CPU without AVX512-BF16 or AMX
# runs) against the default, 5 steps each. The same rounded inputs, so they differ by
# accumulation order alone (measured 1e-7) at first; over longer runs such differences
# flip bfloat16 roundings and compound (measured 2.5e-5 after 20 steps, 6e-3 after 40),
# so the comparison stays short.
five=("${common[@]}" --max_steps 5)
MIRRORED_CPU_BF16=rounded "$MIRRORED" train "${five[@]}" --out "$WORK/rounded"
MIRRORED_CPU_BF16=auto "$MIRRORED" train "${five[@]}" --out "$WORK/auto"
"$COMPARE" "$WORK/auto/final.h5" "$WORK/rounded/final.h5" --rtol 1e-5
export MIRRORED_CPU_BF16=bogus
expect_exit 3 bad_bf16_method "MIRRORED_CPU_BF16=bogus: expected auto, onednn, mkl or rounded" 60 1 train "${five[@]}" \
  --out "$WORK/bogus"
# MKL's bf16 GEMM is opened at start-up: a library that is not there stops every rank.
export MIRRORED_CPU_BF16=mkl MIRRORED_MKL_LIBRARY=/nonexistent/libmkl_rt.so.3
expect_exit 3 missing_mkl "MIRRORED_CPU_BF16=mkl: could not load MKL: /nonexistent/libmkl_rt.so.3" 60 2 train \
  "${five[@]}" --out "$WORK/no_mkl"
unset MIRRORED_CPU_BF16 MIRRORED_MKL_LIBRARY
echo "ok: the portable bf16 method agrees with oneDNN's"

# Resume across precisions: 20 bf16 steps, then fp32 to step 40; 20 fp32 steps, then bf16.
# precision changes the result, so resume = auto would refuse the directory as another
# run's: the checkpoints are named (--resume DIR), which continues with a warning.
resume=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1
        --model.hidden 32 --seed 5 --threads 1 --checkpoint.every_steps 20)
"$MIRRORED" train "${resume[@]}" --precision bf16 --max_steps 20 --out "$WORK/r.bf16" > /dev/null
"$MIRRORED" train "${resume[@]}" --precision fp32 --max_steps 40 --out "$WORK/r.bf16" --resume "$WORK/r.bf16/checkpoints" > "$WORK/r1.log" 2>&1 ||
  { cat "$WORK/r1.log"; fail "fp32 resume of a bf16 checkpoint"; }
grep -q "resuming from .*ckpt-000000020.h5" "$WORK/r1.log" || { cat "$WORK/r1.log"; fail "did not resume at 20"; }
grep -q "precision bf16 -> fp32" "$WORK/r1.log" || { cat "$WORK/r1.log"; fail "no warning naming the change"; }
"$MIRRORED" train "${resume[@]}" --precision fp32 --max_steps 20 --out "$WORK/r.fp32" > /dev/null
"$MIRRORED" train "${resume[@]}" --precision bf16 --max_steps 40 --out "$WORK/r.fp32" --resume "$WORK/r.fp32/checkpoints" > "$WORK/r2.log" 2>&1 ||
  { cat "$WORK/r2.log"; fail "bf16 resume of an fp32 checkpoint"; }
grep -q "resuming from .*ckpt-000000020.h5" "$WORK/r2.log" || { cat "$WORK/r2.log"; fail "did not resume at 20"; }
[[ -f "$WORK/r.bf16/final.h5" && -f "$WORK/r.fp32/final.h5" ]] || fail "no final.h5 after resuming"
echo "ok: bf16 -> fp32 and fp32 -> bf16 resume"

# Accuracy: the cnn of cnn_accuracy.sh (sync batch norm, 2 ranks), 150 steps in each precision.
data=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --threads 1 --epochs 1 --max_steps 150)
mpirun_np 2 train --config "$SOURCE_DIR/launch/configs/fmnist_cnn.ini" "${data[@]}" --precision fp32 --out "$WORK/cnn.fp32"
mpirun_np 2 train --config "$SOURCE_DIR/launch/configs/fmnist_cnn.ini" "${data[@]}" --precision bf16 --out "$WORK/cnn.bf16"
fp32=$(json_field "$WORK/cnn.fp32/metrics.jsonl" eval test_accuracy)
bf16=$(json_field "$WORK/cnn.bf16/metrics.jsonl" eval test_accuracy)
echo "cnn test accuracy after 150 steps: fp32 $fp32, bf16 $bf16"
awk -v a="$fp32" -v b="$bf16" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
  fail "bf16 cnn accuracy $bf16 is more than 0.01 from fp32's $fp32"
