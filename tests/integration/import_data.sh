#!/usr/bin/env bash
# Fixture: imports Fashion-MNIST into DATA_DIR unless already there.
set -euo pipefail
src=${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}
if [[ -s "$DATA_DIR/train.h5" && -s "$DATA_DIR/test.h5" ]]; then exit 0; fi
[[ -s "$src/train-images-idx3-ubyte.gz" ]] || { echo "SKIP: no Fashion-MNIST IDX files in $src (apt-get install dataset-fashion-mnist)"; exit 77; }
mkdir -p "$DATA_DIR"
"$MIRRORED" data import-idx --images "$src/train-images-idx3-ubyte.gz" --labels "$src/train-labels-idx1-ubyte.gz" --out "$DATA_DIR/train.h5"
"$MIRRORED" data import-idx --images "$src/t10k-images-idx3-ubyte.gz" --labels "$src/t10k-labels-idx1-ubyte.gz" --out "$DATA_DIR/test.h5"
