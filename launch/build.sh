#!/usr/bin/env bash
# Configures and builds mirrored with CMake.
# usage: launch/build.sh [BUILD_DIR] [extra cmake -D options...]   (default: build)
# env:   BUILD_TYPE (default Release); CUDA_ARCH: empty for sm_80+sm_90 machine code and
#        sm_90 PTX, "native" for this machine's GPUs, or a list such as "89" or "80;90"
#        MIRRORED_MPI: auto (default: the Open MPI 5 of launch/install_openmpi.sh when it is
#        installed, else the MPI on PATH), prefix (that Open MPI, required) or system
#        MIRRORED_BUILD_TARGETS: the targets to build, space-separated (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
source launch/mpi_env.sh
dir=${1:-build}
shift || true
mpi=()
mpi_prefix=$(mirrored_mpi_for_build)
mpi_choice=${mpi_prefix:-system}
if [[ -n "$mpi_prefix" ]]; then
  mpi=(-DMPI_C_COMPILER="$mpi_prefix/bin/mpicc" -DMPI_CXX_COMPILER="$mpi_prefix/bin/mpicxx"
       -DMPIEXEC_EXECUTABLE="$mpi_prefix/bin/mpiexec")
fi
# FindMPI keeps what it found in the cache; a build folder configured for the other MPI
# starts its configuration afresh (the objects are rebuilt either way).
mkdir -p "$dir"
if [[ -f "$dir/CMakeCache.txt" && "$(cat "$dir/.mirrored-mpi" 2>/dev/null)" != "$mpi_choice" ]]; then
  rm -f "$dir/CMakeCache.txt"
fi
echo "$mpi_choice" >"$dir/.mirrored-mpi"
arch=()
[[ -n "${CUDA_ARCH:-}" ]] && arch=(-UCMAKE_CUDA_ARCHITECTURES -DCUDA_ARCH="$CUDA_ARCH")
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "${arch[@]}" "${mpi[@]}" "$@" >"$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
targets=()
for target in ${MIRRORED_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
