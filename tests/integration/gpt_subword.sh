#!/usr/bin/env bash
# The language model in the ecosystem's formats, end to end on a small corpus imported here
# (this repository's documentation, SentencePiece BPE of 400 pieces, no download) and a tiny gpt
# (2 blocks, width 32, context 32), a few seconds per step below:
# 1. import: uint16 token files naming tokenizer.model by its sha256;
# 2. a validation file of another tokenizer is refused, naming both;
# 3. training reports bits per byte over the bytes the tokens decode to (below the loss in
#    bits per token, since a piece is more than a byte);
# 4. generate: the key/value cache and the whole-window path print the same text;
# 5. export: PyTorch (tests/bench/gpt_step_pytorch.py's model) loads the safetensors file and
#    gives mirrored's logits within 1e-5 (skipped, with the reason, without python3-torch);
# 6. init_from reads the export back; a truncated or mislabelled file is refused by name.
source "$(dirname "$0")/lib.sh"
"$MIRRORED" data import-text --tokenizer sentencepiece --vocab_size 400 --out "$WORK/bpe" "${DOCS_TEXT[@]}" \
  > "$WORK/import.log" 2>&1 || {
  grep -q "built without SentencePiece" "$WORK/import.log" && { echo "SKIP: $(tail -1 "$WORK/import.log")"; exit 77; }
  cat "$WORK/import.log"; fail "import-text --tokenizer sentencepiece"; }
"$MIRRORED" data import-text --out "$WORK/bytes" "${DOCS_TEXT[@]}" > /dev/null
"$MIRRORED" data inspect "$WORK/bpe/train.h5" > "$WORK/inspect.txt"
grep -q "/tokens  uint16" "$WORK/inspect.txt" || { cat "$WORK/inspect.txt"; fail "subword tokens are not uint16"; }
grep -q "tokenizer    sentencepiece" "$WORK/inspect.txt" || { cat "$WORK/inspect.txt"; fail "tokenizer attribute"; }
sha=$(sha256sum "$WORK/bpe/tokenizer.model" | cut -d' ' -f1)
grep -q "$sha" "$WORK/inspect.txt" || { cat "$WORK/inspect.txt"; fail "the token file does not name the model's sha256 $sha"; }
echo "ok: import: $(sed -n 3p "$WORK/import.log"), tokenizer.model sha256 ${sha:0:12}..."

model=(--model gpt --gpt.layers 2 --gpt.heads 2 --gpt.width 32 --gpt.context 32 --batch_size 8 --epochs 1
       --seed 5 --threads 1 --optimizer adamw --lr 3e-3 --eval_windows 64 --eval_batch_size 64)
expect_exit 2 tokenizer_mismatch "data.test '$WORK/bytes/val.h5' with bytes" 30 1 train "${model[@]}" \
  --data.train "$WORK/bpe/train.h5" --data.test "$WORK/bytes/val.h5" --out "$WORK/mismatch"
grep -qF "was made with tokenizer sentencepiece (tokenizer.model, sha256 ${sha:0:12}" "$WORK/tokenizer_mismatch.out" ||
  { cat "$WORK/tokenizer_mismatch.out"; fail "the mismatch does not name the training file's tokenizer"; }

"$MIRRORED" train "${model[@]}" --data.train "$WORK/bpe/train.h5" --data.test "$WORK/bpe/val.h5" --max_steps 40 \
  --quiet --out "$WORK/run"
loss=$(json_field "$WORK/run/metrics.jsonl" eval val_loss)
bpb=$(json_field "$WORK/run/metrics.jsonl" eval bits_per_byte)
awk -v l="$loss" -v b="$bpb" 'BEGIN { exit !(b > 0 && b < 0.8 * l / log(2)) }' ||
  fail "bits_per_byte $bpb is not below the loss in bits per token ($loss nats) by the bytes a piece covers"
echo "ok: val_loss $loss nats per token, $bpb bits per byte"

gen=(generate --checkpoint "$WORK/run/final.h5" --prompt "The language model" --tokens 80 --temperature 0.8
     --top_k 40 --seed 3)
"$MIRRORED" "${gen[@]}" > "$WORK/cached.txt" 2> "$WORK/cached.err"
"$MIRRORED" "${gen[@]}" --kv_cache false > "$WORK/uncached.txt" 2> /dev/null
cmp -s "$WORK/cached.txt" "$WORK/uncached.txt" || { diff "$WORK/cached.txt" "$WORK/uncached.txt"; fail "cached and uncached generation differ"; }
[[ $(head -c 18 "$WORK/cached.txt") == "The language model" ]] || fail "generate does not start with the prompt"
echo "ok: generate, cached = uncached over 80 tokens (window restarts included): $(head -c 70 "$WORK/cached.txt" | tr '\n' ' ')"

"$MIRRORED" export --checkpoint "$WORK/run/final.h5" --out "$WORK/model.safetensors"
"$MIRRORED" generate --checkpoint "$WORK/run/final.h5" --prompt "Training reads a token file" --tokens 0 \
  --logits_out "$WORK/logits.npy" 2> "$WORK/logits.err" > /dev/null
ids=$(sed -nE 's/.*of the window.s tokens ([0-9,]+) written.*/\1/p' "$WORK/logits.err")
[[ -n "$ids" ]] || { cat "$WORK/logits.err"; fail "generate --logits_out did not name the tokens"; }
torch_status=0
/usr/bin/python3 "$SOURCE_DIR/tests/integration/gpt2_logits_torch.py" "$WORK/model.safetensors" "$WORK/logits.npy" \
  "$ids" > "$WORK/torch.out" 2>&1 || torch_status=$?
cat "$WORK/torch.out"
[[ $torch_status -eq 0 || $torch_status -eq 77 ]] || fail "PyTorch's logits differ from mirrored's"

# init_from: one SGD step at lr 1e-30 moves no parameter of a trained model by a float's
# rounding, so the run's final.h5 is the exported model (the bit-exact round trip is the
# unit test Gpt2Safetensors.ExportAndReadBackAreBitExactWithConv1dLayouts).
tune=("${model[@]}" --data.train "$WORK/bpe/train.h5" --data.test "$WORK/bpe/val.h5" --max_steps 1 --quiet
      --optimizer sgd --momentum 0 --lr 1e-30)
"$MIRRORED" train "${tune[@]}" --init_from "$WORK/model.safetensors" --out "$WORK/tuned" > /dev/null
"$COMPARE" "$WORK/run/final.h5" "$WORK/tuned/final.h5" --rtol 1e-20
echo "ok: init_from = the export starts from the exported parameters"

size=$(stat -c %s "$WORK/model.safetensors")
head -c $((size - 100)) "$WORK/model.safetensors" > "$WORK/cut.safetensors"
expect_exit 4 truncated_safetensors "'$WORK/cut.safetensors': tensor transformer.ln_f.bias" 30 1 train "${tune[@]}" \
  --init_from "$WORK/cut.safetensors" --out "$WORK/cut"
sed '0,/"F32"/s//"F16"/' "$WORK/model.safetensors" > "$WORK/f16.safetensors"
expect_exit 4 mislabelled_safetensors "(mislabelled)" 30 1 train "${tune[@]}" --init_from "$WORK/f16.safetensors" \
  --out "$WORK/f16"
expect_exit 4 other_shape "holds a gpt with n_positions = 32, but gpt.context = 16 was given" 30 1 train "${tune[@]}" \
  --gpt.context 16 --init_from "$WORK/model.safetensors" --out "$WORK/shape"
[[ $torch_status -eq 0 ]] || { tail -1 "$WORK/torch.out"; exit 77; }
