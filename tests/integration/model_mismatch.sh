#!/usr/bin/env bash
# A file of another model, in every command that reads one: the model the file records is
# compared with the one to build before any tensor, the mismatch is said once ("'FILE'
# holds an mlp model (hidden 32); ... a cnn (...)"), and every command exits 4
# (docs/troubleshooting.md, exit codes): train --resume at 2 ranks, eval --config, generate,
# export. Nothing is left behind by the refused training run. Errors every rank reaches alike
# end a 2-rank job with their code and without Open MPI's MPI_ABORT banner: the checkpoint of
# another model (found after MPI started, decided by the chief and broadcast), a bad
# configuration value (before MPI starts, and one judged by the started world), a missing
# data file.
source "$(dirname "$0")/lib.sh"
require_data
data=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --threads 1 --quiet)
"$MIRRORED" train "${data[@]}" --model mlp --model.hidden 32 --max_steps 4 --checkpoint.every_steps 4 \
  --out "$WORK/mlp" >"$WORK/mlp.log" 2>&1 || { cat "$WORK/mlp.log"; fail "the mlp run"; }
"$MIRRORED" train "${data[@]}" --model cnn --cnn.channels 4,4 --cnn.fc 8 --max_steps 2 --checkpoint.every_steps 2 \
  --out "$WORK/cnn" >"$WORK/cnn.log" 2>&1 || { cat "$WORK/cnn.log"; fail "the cnn run"; }
mlp_ckpt="$WORK/mlp/checkpoints/ckpt-000000004.h5"
cnn_ckpt="$WORK/cnn/checkpoints/ckpt-000000002.h5"
[[ -s "$mlp_ckpt" && -s "$cnn_ckpt" ]] || fail "no checkpoints written"
mlp="an mlp model (hidden 32)"
cnn="a cnn model (channels 4,4, kernel 5, padding 0, fc 8)"

# once NAME TEXT: TEXT appears exactly once in NAME's output (no warning before the error).
once() {
  local n
  n=$(grep -cF -- "$2" "$WORK/$1.out")
  ((n == 1)) || { cat "$WORK/$1.out"; fail "$1: '$2' appears $n times, expected once"; }
}

expect_exit 4 train_resume "resume: '$cnn_ckpt' holds $cnn; this run builds an mlp (hidden 32)" 30 2 train \
  "${data[@]}" --model mlp --model.hidden 32 --max_steps 4 --resume "$cnn_ckpt" --out "$WORK/refused"
once train_resume "holds a cnn model"
no_abort_banner() {
  ! grep -q "MPI_ABORT" "$WORK/$1.out" || { cat "$WORK/$1.out"; fail "$1: Open MPI's MPI_ABORT banner"; }
}
no_abort_banner train_resume
expect_exit 2 bad_config "lr = '-1': expected a number > 0" 30 2 train "${data[@]}" --lr -1 --out "$WORK/bad_config"
no_abort_banner bad_config
# A configuration that only the started world can judge (after MPI_Init): 65 over 2 ranks.
expect_exit 2 indivisible_batch "batch_size (global) 65 does not divide evenly over 2 replicas" 30 2 train "${data[@]}" \
  --batch_size 65 --out "$WORK/indivisible"
no_abort_banner indivisible_batch
expect_exit 3 missing_data "$WORK/nope.h5" 30 2 train "${data[@]}" --data.train "$WORK/nope.h5" --out "$WORK/missing"
no_abort_banner missing_data
[[ ! -e "$WORK/refused/final.h5" && -z "$(ls "$WORK/refused/checkpoints" 2>/dev/null)" ]] ||
  fail "train_resume: the refused run wrote a model or checkpoints"

expect_exit 4 eval_config "eval: '$cnn_ckpt' holds $cnn; --config '$WORK/mlp/config.ini' builds an mlp (hidden 32)" \
  30 1 eval --checkpoint "$cnn_ckpt" --config "$WORK/mlp/config.ini" --data "$DATA_DIR/test.h5"
once eval_config "holds a cnn model"
expect_exit 4 eval_final "eval: '$WORK/cnn/final.h5' holds $cnn; --config" 30 1 eval --checkpoint "$WORK/cnn/final.h5" \
  --config "$WORK/mlp/config.ini" --data "$DATA_DIR/test.h5"

expect_exit 4 generate "generate: '$mlp_ckpt' holds $mlp; generate needs a gpt" 30 1 generate \
  --checkpoint "$mlp_ckpt" --prompt "To be" --tokens 4
once generate "holds an mlp model"
expect_exit 4 export "export: '$WORK/mlp/final.h5' holds $mlp; export writes a gpt in GPT-2's layout" 30 1 export \
  --checkpoint "$WORK/mlp" --out "$WORK/x.safetensors"
once export "holds an mlp model"
[[ ! -e "$WORK/x.safetensors" ]] || fail "export wrote a file for an mlp"
echo "model_mismatch: ok"
