#!/usr/bin/env bash
# MIRRORED_CPU_SIMD runs the CPU kernels at a lower SIMD level than the CPU's: a training
# gives the same bits at every level (the products held on one BLAS kernel set, the part
# that differs between CPUs), `mirrored info` reports the level and the choices that follow
# it, and a value the CPU cannot run stops every rank with the variable named.
source "$(dirname "$0")/lib.sh"
field() { sed -nE "s/^  $1 +(.*)/\1/p" | head -1; }

(export MIRRORED_CPU_SIMD=sse4
 expect_exit 3 bad_value "MIRRORED_CPU_SIMD=sse4: expected auto, avx512, avx2 or baseline" 60 1 info
 expect_exit 3 bad_value_train "MIRRORED_CPU_SIMD=sse4" 60 2 train --model mlp --max_steps 1 --out "$WORK/bad")

if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then
  echo "SKIP: this CPU has no AVX2/FMA: the baseline is its only level"
  exit 77
fi
levels=(avx2 baseline)
grep -qw avx512f /proc/cpuinfo && levels=(avx512 "${levels[@]}")

info=$(env -u OPENBLAS_CORETYPE MIRRORED_CPU_SIMD=avx2 "$MIRRORED" info)
[[ $(field "cpu simd" <<< "$info") == "avx2 (MIRRORED_CPU_SIMD)" ]] || fail "cpu simd: $(field "cpu simd" <<< "$info")"
[[ $(field "blas core" <<< "$info") =~ ^(Haswell|Zen)\  || $(field "blas core" <<< "$info") =~ ^(Haswell|Zen)$ ]] ||
  fail "MIRRORED_CPU_SIMD=avx2 left OpenBLAS on $(field "blas core" <<< "$info")"
[[ $(field "cpu fp32 products" <<< "$info") == "OpenBLAS sgemm"* ]] ||
  fail "MIRRORED_CPU_SIMD=avx2: fp32 products on $(field "cpu fp32 products" <<< "$info")"
echo "ok: MIRRORED_CPU_SIMD=avx2: $(field "blas core" <<< "$info" | cut -d' ' -f1) kernels, $(field "cpu fp32 products" <<< "$info" | cut -d'(' -f1)"

# A small gpt (head size 32 and T = 32: the attention reads its rows in place), AdamW with
# the clip, two threads and the invariant reduction (the exact sum's conversions).
"$MIRRORED" data import-text --out "$WORK/corpus" "$SOURCE_DIR/README.md" > /dev/null
model=(--model gpt --data.train "$WORK/corpus/train.h5" --data.test "$WORK/corpus/val.h5" --gpt.layers 2
       --gpt.heads 2 --gpt.width 64 --gpt.context 32 --batch_size 8 --epochs 1 --seed 5 --threads 2
       --optimizer adamw --lr 0.003 --grad_clip 0.5 --reduction invariant --max_steps 12 --eval_every 0 --quiet)
for level in "${levels[@]}"; do
  MIRRORED_CPU_SIMD=$level MIRRORED_CPU_GEMM=openblas OPENBLAS_CORETYPE=Haswell \
    "$MIRRORED" train "${model[@]}" --out "$WORK/$level"
done
for level in "${levels[@]:1}"; do
  "$COMPARE" "$WORK/${levels[0]}/final.h5" "$WORK/$level/final.h5" --exact
done
echo "ok: ${levels[*]}: the same parameters bit for bit"
