#!/usr/bin/env bash
# The language model learns on the real corpus (the Shakespeare plays, byte tokens,
# launch/import_shakespeare.sh): a small gpt (2 blocks of 4 heads, width 64, context 64,
# 0.12 M parameters), 300 AdamW steps of 16 windows on 2 ranks, then the validation loss
# on 256 fixed windows must be below 2.8 nats.
# Why 2.8: guessing uniformly over 256 bytes costs ln 256 = 5.55 nats; the best model that
# ignores context (byte frequencies of train.h5) costs 3.30 nats, and one that sees only the
# previous byte 2.47. Measured here: 2.617 after 300 steps (2.485 while weight decay still
# shrank the biases and LayerNorm gains too). 2.8 leaves 0.18 nats of margin above that,
# and is still well below anything a model that does not use its context can reach.
# Then a 1 MiB cache over the corpus must train the same model as an unbounded cache.
# Skips (77) when the corpus is not imported.
source "$(dirname "$0")/lib.sh"
corpus=${SHAKESPEARE_DIR:-$SOURCE_DIR/data/shakespeare}
[[ -s "$corpus/train.h5" && -s "$corpus/val.h5" ]] ||
  { echo "SKIP: the Shakespeare corpus is not imported in $corpus (run launch/import_shakespeare.sh)"; exit 77; }
start=$SECONDS
mpirun_np 2 train --model gpt --data.train "$corpus/train.h5" --data.test "$corpus/val.h5" \
  --gpt.layers 2 --gpt.heads 4 --gpt.width 64 --gpt.context 64 --batch_size 16 --optimizer adamw --lr 3e-3 \
  --adam.beta2 0.99 --weight_decay 0.1 --lr_schedule cosine --lr_warmup_steps 30 --lr_decay_steps 300 --lr_min 3e-4 \
  --epochs 1 --max_steps 300 --eval_every 300 --eval_windows 256 --eval_batch_size 128 --seed 1 --threads 1 \
  --progress off --out "$WORK/run" > "$WORK/run.log" 2>&1 || { cat "$WORK/run.log"; fail "training failed"; }
loss=$(json_field "$WORK/run/metrics.jsonl" eval val_loss)
awk -v l="$loss" 'BEGIN { exit !(l > 0 && l < 2.8) }' || { cat "$WORK/run.log"; fail "validation loss $loss is not below 2.8 nats"; }
echo "ok: validation loss $loss nats ($(json_field "$WORK/run/metrics.jsonl" eval bits_per_byte) bits/byte) after 300 steps, $((SECONDS - start)) s"

# The corpus (4.8 MB) is larger than a 1 MiB cache: training through it gives the same model,
# bit for bit, as with no bound on the cache (data.cache_mb = 0).
small=(train --model gpt --data.train "$corpus/train.h5" --data.test "$corpus/val.h5" --gpt.layers 1 --gpt.heads 2
       --gpt.width 32 --gpt.context 64 --batch_size 16 --optimizer adamw --lr 3e-3 --epochs 1 --max_steps 20
       --eval_windows 16 --seed 2 --threads 1 --quiet)
"$MIRRORED" "${small[@]}" --data.cache_mb 1 --out "$WORK/cache1"
"$MIRRORED" "${small[@]}" --data.cache_mb 0 --out "$WORK/unbounded"
"$COMPARE" "$WORK/cache1/final.h5" "$WORK/unbounded/final.h5" --exact
echo "ok: a 1 MiB cache over the 4.8 MB corpus trains the same model as an unbounded one"
