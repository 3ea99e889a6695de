#!/usr/bin/env bash
# Configures and builds mirrored with CMake.
# usage: launch/build.sh [BUILD_DIR] [extra cmake -D options...]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@" >"$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j"$(nproc)"
