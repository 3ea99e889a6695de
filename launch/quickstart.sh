#!/usr/bin/env bash
# From a fresh Debian 12 machine to a trained model: installs what is missing, builds,
# imports Fashion-MNIST into HDF5 and trains the MLP on 2 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install_deps.sh
launch/build.sh build
launch/import_fmnist.sh build/mirrored
# Under mpirun a rank's stderr is a pipe, so ask for the live progress bar when this shell
# has a terminal (a log file gets plain lines).
progress=()
if [[ -t 2 ]]; then progress=(--progress bar); fi
launch/local.sh 2 build/mirrored train --config launch/configs/fmnist_mlp.ini --out runs/quickstart --resume never "${progress[@]}" "$@"
