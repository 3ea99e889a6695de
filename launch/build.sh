#!/usr/bin/env bash
# Configures and builds mirrored with CMake.
# usage: launch/build.sh [BUILD_DIR] [extra cmake -D options...]   (default: build)
# env:   BUILD_TYPE (default Release); CUDA_ARCH: empty for sm_80+sm_90 machine code and
#        sm_90 PTX, "native" for this machine's GPUs, or a list such as "89" or "80;90"
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
arch=()
[[ -n "${CUDA_ARCH:-}" ]] && arch=(-UCMAKE_CUDA_ARCHITECTURES -DCUDA_ARCH="$CUDA_ARCH")
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "${arch[@]}" "$@" >"$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j"$(nproc)"
