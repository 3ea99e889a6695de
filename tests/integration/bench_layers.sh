#!/usr/bin/env bash
# mirrored bench layers: each layer reports its own FLOPs and parts, so the table's MFLOP
# column holds the exact counts of the matrix products (forward, plus twice that for
# backward; the first layer has no input gradient): an mlp and a cnn on Fashion-MNIST, a
# one-block gpt on this repository's documentation, two timed steps each.
source "$(dirname "$0")/lib.sh"
require_data
quick=(--steps 2 --warmup 1 --threads 1 --data.train "$DATA_DIR/train.h5" --batch_size 100)

# expect_row FILE NAME MFLOP: a row of NAME whose MFLOP column is MFLOP.
expect_row() {
  grep -qE "^ +$2 +(\[[0-9, ]+\] +)?[0-9.]+ +[0-9.]+ +[0-9.]+ +$3 +[0-9.]+ +[0-9.]+$" "$1" ||
    { cat "$1"; fail "$(basename "$1"): no row '$2' with $3 MFLOP"; }
}

# mlp 784 -> 64 -> 10, batch 100: 2*100*784*64 * 2 (first layer), 2*100*64*10 * 3.
"$MIRRORED" bench layers "${quick[@]}" --model mlp --model.hidden 64 >"$WORK/mlp.out" 2>&1 ||
  { cat "$WORK/mlp.out"; fail "bench layers (mlp) failed"; }
expect_row "$WORK/mlp.out" '0\.linear' 20.1
expect_row "$WORK/mlp.out" '2\.linear' 0.4
# cnn: conv 1 -> 4 channels, 5x5 on 28x28 -> 24x24: 2*100*4*576*25 * 2 (first layer).
"$MIRRORED" bench layers "${quick[@]}" --model cnn --cnn.channels 4 --cnn.fc 16 >"$WORK/cnn.out" 2>&1 ||
  { cat "$WORK/cnn.out"; fail "bench layers (cnn) failed"; }
expect_row "$WORK/cnn.out" '0\.conv' 23.0

# gpt, width 32, context 32, batch 8 (256 tokens), x3 for backward: qkv 2*256*32*96,
# attention core 4*8*(32*33/2)*32 (the causal half), projection 2*256*32*32, mlp 2*256*32*128
# each way; the block is their sum.
"$MIRRORED" data import-text --out "$WORK/corpus" "${DOCS_TEXT[@]}" >/dev/null
"$MIRRORED" bench layers --steps 2 --warmup 1 --threads 1 --model gpt --data.train "$WORK/corpus/train.h5" \
  --gpt.layers 1 --gpt.heads 2 --gpt.width 32 --gpt.context 32 --batch_size 8 >"$WORK/gpt.out" 2>&1 ||
  { cat "$WORK/gpt.out"; fail "bench layers (gpt) failed"; }
expect_row "$WORK/gpt.out" 'attn\.qkv' 4.7
expect_row "$WORK/gpt.out" 'attn\.core' 1.6
expect_row "$WORK/gpt.out" 'attn\.proj' 1.6
expect_row "$WORK/gpt.out" 'mlp\.fc\+gelu' 6.3
expect_row "$WORK/gpt.out" 'mlp\.proj' 6.3
expect_row "$WORK/gpt.out" '1\.block' 20.5
grep -qE '^ +ln1 +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$WORK/gpt.out" || { cat "$WORK/gpt.out"; fail "no timed ln1 part"; }
grep -qE '^ +residual\+ln2 +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$WORK/gpt.out" || { cat "$WORK/gpt.out"; fail "no timed residual+ln2 part"; }
grep -qE '^layers_ms=[0-9.]+ sgemm_gflops=[0-9.]+ percent_of_sgemm=[0-9.]+ percent_of_bound=[0-9.]+$' "$WORK/gpt.out" ||
  { cat "$WORK/gpt.out"; fail "no summary line with the step's share of its bound"; }
# --cpu-time: the same table on the process's CPU clock.
"$MIRRORED" bench layers "${quick[@]}" --model mlp --model.hidden 64 --cpu-time >"$WORK/mlp_cpu.out" 2>&1 ||
  { cat "$WORK/mlp_cpu.out"; fail "bench layers --cpu-time failed"; }
grep -q "1 thread(s), CPU time," "$WORK/mlp_cpu.out" || { cat "$WORK/mlp_cpu.out"; fail "--cpu-time not in the header"; }
expect_row "$WORK/mlp_cpu.out" '0\.linear' 20.1
! grep -q "bf16" "$WORK/mlp_cpu.out" || fail "a float32 table printed a bf16 bound"
# precision = bf16: the same FLOPs, and the step also set against the bf16 product's rate.
"$MIRRORED" bench layers "${quick[@]}" --model mlp --model.hidden 64 --precision bf16 >"$WORK/mlp_bf16.out" 2>&1 ||
  { cat "$WORK/mlp_bf16.out"; fail "bench layers --precision bf16 failed"; }
expect_row "$WORK/mlp_bf16.out" '0\.linear' 20.1
grep -qE '^bf16_gflops=[0-9.]+ percent_of_bf16_bound=[0-9.]+$' "$WORK/mlp_bf16.out" ||
  { cat "$WORK/mlp_bf16.out"; fail "no bf16 bound line"; }
echo "ok: bench layers: the FLOPs of mlp, cnn and gpt layers and the gpt block's parts"
