#!/usr/bin/env bash
# Imports Fashion-MNIST (Debian's dataset-fashion-mnist IDX files) into HDF5 under
# data/fashion-mnist/, once.
# usage: launch/import_fmnist.sh [MIRRORED_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/mirrored}
src=${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}
out=data/fashion-mnist
mkdir -p "$out"
for split in train:train t10k:test; do
  idx=${split%%:*} name=${split##*:}
  if [[ ! -s "$out/$name.h5" ]]; then
    "$bin" data import-idx --images "$src/$idx-images-idx3-ubyte.gz" \
      --labels "$src/$idx-labels-idx1-ubyte.gz" --out "$out/$name.h5.tmp"
    mv "$out/$name.h5.tmp" "$out/$name.h5"
  fi
done
