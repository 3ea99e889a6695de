#!/usr/bin/env bash
# Builds, here, what the GPU self-test runs on a GPU machine, and packs it with every library
# that machine's image may lack, so the GPU machine builds nothing:
#   launch/gpu_bundle.sh DIR                 # here (CUDA 13, cuDNN 9, NCCL 2.28 installed)
#   launch/gpu_selftest.sh --bundle DIR      # there, with DIR and the repository copied over
#
# The programs: `mirrored`, `unit_tests` and `mpi_tests`, with sm_90 machine code (H100,
# H200) and PTX that the driver compiles for newer GPUs. By default they are built in
# build-gpu-bundle for CUDA_ARCH "90-real;90-virtual" (the targets alone, with ccache when
# CMAKE_CUDA_COMPILER_LAUNCHER says so); --build-dir BUILD takes them from a CUDA build
# that exists already (CI's `build`, whose default architectures 80-real;90-real;90-virtual
# include both), so nothing is compiled again. Either way the fat binaries are read
# (launch/fatbin_archs.py) and a bundle without sm_90 machine code or PTX is refused.
#
# The libraries: everything the programs load (ldd) except the C library, which the image
# has, and the CUDA libraries (libcudart, cuBLAS, cuDNN, NCCL: hundreds of MB), which the
# image keeps in its toolkit or its PyTorch wheels and the self-test finds there
# (launch/gpu_cuda_libs.sh). So: Open MPI 5 (the relocatable prefix the programs were linked
# against, with its plugins and help files, less its headers), HDF5 and its libcurl closure,
# Boost.Program_options, OpenBLAS, oneDNN and its OpenMP runtime, SentencePiece, zlib, and
# whatever else ldd names. libstdc++ and libgcc_s go in a fallback folder, used only where
# the image's are older than the programs need. Programs are stripped.
#
# DIR holds (each of these travels to the GPU machine, within its 64 MiB with the repository):
#   payload.tar.xz   libexec/ (the three programs), lib/, fallback/, openmpi/
#   manifest.txt     how it was built: commit, toolkit, CUDA_ARCH, the GPU code in the fat binaries,
#                    the CUDA libraries to find there, the newest glibc and GLIBCXX symbol
#                    versions needed, the GPU test filters (tests/tools/gpu_tests.py)
#   sizes.txt        each file's size, unpacked, and DIR's size as it travels
#   fmnist/, shakespeare/   the training data (launch/gpu_bundle_data.sh)
#
# usage: launch/gpu_bundle.sh DIR [--build-dir BUILD] [--limit-mib N]
#   --build-dir BUILD  take the programs from this CUDA build (configured with the tests)
#   --limit-mib N      refuse a DIR larger than N MiB (default 60: the repository and DIR
#                      travel to the GPU machine within 64 MiB)
# env: CUDA_ARCH (default "90-real;90-virtual", for the build it makes), TRAIN_IMAGES,
#      FMNIST_IDX_DIR, WHEEL_CACHE_DIR (gpu_bundle_data.sh), XZ_OPT (default -6)
set -euo pipefail
cd "$(dirname "$0")/.."
source launch/mpi_env.sh
source launch/gpu_bundle_data.sh

out="" build="" limit_mib=60
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=${2:?--build-dir needs a folder}; shift 2 ;;
    --limit-mib) limit_mib=${2:?--limit-mib needs a number}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_bundle: unknown option $1" >&2; exit 2 ;;
    *) [[ -z "$out" ]] || { echo "gpu_bundle: one DIR only" >&2; exit 2; }; out=$1; shift ;;
  esac
done
[[ -n "$out" ]] || { echo "usage: launch/gpu_bundle.sh DIR [--build-dir BUILD] [--limit-mib N]" >&2; exit 2; }
fail() { echo "gpu_bundle: $*" >&2; exit 1; }
programs=(mirrored tests/unit_tests tests/mpi_tests)

# ---- the programs ----------------------------------------------------------------------
build_programs() {
  local dir=$1 mpi=() prefix
  prefix=$(mirrored_mpi_for_build)
  [[ -n "$prefix" ]] && mpi=(-DMPI_C_COMPILER="$prefix/bin/mpicc" -DMPI_CXX_COMPILER="$prefix/bin/mpicxx"
                              -DMPIEXEC_EXECUTABLE="$prefix/bin/mpiexec")
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMIRRORED_CUDA=ON -DMIRRORED_BUILD_TESTS=ON \
    -UCMAKE_CUDA_ARCHITECTURES -DCUDA_ARCH="${CUDA_ARCH:-90-real;90-virtual}" "${mpi[@]}" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log" >&2; fail "configuring $dir failed"; }
  cmake --build "$dir" -j"$(nproc)" --target mirrored unit_tests mpi_tests
}
if [[ -z "$build" ]]; then
  build=build-gpu-bundle
  mkdir -p "$build"
  start=$SECONDS
  build_programs "$build"
  echo "gpu_bundle: built mirrored, unit_tests and mpi_tests in $build in $((SECONDS - start)) s"
fi
for p in "${programs[@]}"; do [[ -x "$build/$p" ]] || fail "$build/$p missing (a CUDA build with the tests: launch/build.sh $build -DMIRRORED_BUILD_TESTS=ON)"; done
[[ "$(ldd "$build/mirrored")" == *libcudart.so* ]] || fail "$build/mirrored is not a CUDA build (mirrored info says why)"
for p in "${programs[@]}"; do
  archs=$(python3 launch/fatbin_archs.py "$build/$p") || fail "$build/$p carries no GPU code"
  [[ " $archs " == *" sm_90 "* ]] || fail "$build/$p has no sm_90 machine code ($archs): build with CUDA_ARCH containing 90-real"
  [[ "$archs" == *compute_* ]] || fail "$build/$p carries no PTX for newer GPUs ($archs)"
done
archs=$(python3 launch/fatbin_archs.py "$build/mirrored")

# ---- the libraries ---------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT
payload=$work/payload
mkdir -p "$payload"/{libexec,lib,fallback}
mpi_prefix=$(mirrored_mpi_prefix_of "$build/mirrored")
[[ -n "$mpi_prefix" ]] ||
  fail "$build/mirrored is linked with a system MPI, whose plugins cannot be moved: build against the relocatable Open MPI 5 (launch/install_openmpi.sh, then launch/build.sh)"
# What every image has (the C library), and what the image's CUDA installation provides.
base='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libmvec)\.so'
cuda='^lib(cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|cuda|nvrtc|nvJitLink|cufft|curand|cusparse|cusolver)\.so'
declare -A cuda_needed=()
for p in "${programs[@]}"; do
  while read -r name _ path _; do
    [[ "$name" =~ $base ]] && continue
    if [[ "$name" =~ $cuda ]]; then cuda_needed[$name]=1; continue; fi
    [[ "$path" == "not" ]] && fail "$build/$p: $name not found here"
    [[ "$path" == "$mpi_prefix"/* ]] && continue   # carried with the prefix
    if [[ "$name" =~ ^(libstdc\+\+|libgcc_s)\.so ]]; then cp -L "$path" "$payload/fallback/$name"; continue; fi
    [[ -e "$payload/lib/$name" ]] || cp -L "$path" "$payload/lib/$name"
  done < <(ldd "$build/$p" | grep '=>')
  cp "$build/$p" "$payload/libexec/"
done
strip --strip-unneeded "$payload"/libexec/*
# Open MPI: its programs, libraries, plugins, help files and settings; not its headers.
mkdir -p "$payload/openmpi"
tar -C "$mpi_prefix" -cf - --exclude=./include --exclude='*.la' --exclude=./lib/pkgconfig --exclude=./share/man . |
  tar -C "$payload/openmpi" -xf -

# The newest glibc and libstdc++ symbol versions the programs and libraries need, and the
# glibc the fallback libstdc++ needs (it is used only where it can load).
newest_version() {  # newest_version PREFIX FOLDER...: the newest PREFIX_x.y[.z] named in FOLDER...
  local prefix=$1; shift
  { find "$@" -type f \( -name '*.so*' -o -path '*/libexec/*' -o -path '*/bin/*' \) -print0 |
      xargs -0 readelf -V 2>/dev/null || true; } |
    { grep -oE "Name: ${prefix}_[0-9]+(\.[0-9]+)+" || true; } | sed "s/Name: ${prefix}_//" | sort -uV | tail -1
}
glibc=$(newest_version GLIBC "$payload/libexec" "$payload/lib" "$payload/openmpi")
glibcxx=$(newest_version GLIBCXX "$payload/libexec" "$payload/lib" "$payload/openmpi")
fallback_glibc=$(newest_version GLIBC "$payload/fallback")
[[ -n "$glibc" && -n "$glibcxx" ]] || fail "could not read the symbol versions the programs need (readelf)"

# ---- DIR -------------------------------------------------------------------------------
mkdir -p "$out"
rm -f "$out/payload.tar.xz" "$out/manifest.txt" "$out/sizes.txt"
start=$SECONDS
tar -C "$payload" -cf - . | xz -T0 ${XZ_OPT:--6} >"$out/payload.tar.xz"
packed=$((SECONDS - start))
bundle_data "$out"
unit_filter=$(python3 tests/tools/gpu_tests.py filter tests/unit)
mpi_filter=$(python3 tests/tools/gpu_tests.py filter tests/mpi)
cuda_version=$(sed -nE 's/^CMAKE_CUDA_COMPILER_VERSION:[A-Z]+=(.*)/\1/p' "$build/CMakeCache.txt" 2>/dev/null)
[[ -n "$cuda_version" ]] || cuda_version=$(sed -nE 's/^set\(CMAKE_CUDA_COMPILER_VERSION "(.*)"\)/\1/p' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -1)
{
  echo "built_from: $(git describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built_on: $(date -u +%Y-%m-%dT%H:%MZ), $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -m)"
  echo "build_dir: $build"
  echo "cuda_toolkit: ${cuda_version:-unknown}"
  arch_option=$(sed -nE 's/^CUDA_ARCH:[A-Z]+=(.*)/\1/p' "$build/CMakeCache.txt")
  echo "cuda_arch: ${arch_option:-empty, the project default} (what the fat binaries hold: gpu_code)"
  echo "gpu_code: $archs"
  echo "cuda_libraries: $(printf '%s\n' "${!cuda_needed[@]}" | sort | paste -sd' ')"
  echo "mpi: $(basename "$mpi_prefix")"
  echo "glibc: $glibc"
  echo "glibcxx: $glibcxx"
  echo "fallback_glibc: $fallback_glibc"
  echo "unit_filter: $unit_filter"
  echo "mpi_filter: $mpi_filter"
} >"$out/manifest.txt"

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
{
  echo "# unpacked (payload.tar.xz), bytes"
  (cd "$payload" && find . -type f -printf '%s %P\n' | sort -rn)
  echo "# as it travels ($out), bytes"
  (cd "$out" && find . -type f -printf '%s %P\n' | sort -rn)
} >"$out/sizes.txt"
unpacked=$(du -sb "$payload" | cut -f1)
total=$(du -sb "$out" | cut -f1)
echo "gpu_bundle: $archs; CUDA libraries to find there: $(grep '^cuda_libraries:' "$out/manifest.txt" | cut -d' ' -f2-)"
echo "gpu_bundle: glibc >= $glibc and GLIBCXX >= $glibcxx needed there (the carried libstdc++, used where the image's is older, needs glibc >= $fallback_glibc)"
echo "gpu_bundle: payload $(mib "$unpacked") MiB unpacked, $(mib "$(stat -c %s "$out/payload.tar.xz")") MiB as payload.tar.xz (xz in $packed s); $BUNDLE_DATA_NOTE"
echo "gpu_bundle: the largest files unpacked:"
awk 'NR > 1 && /^#/ { exit } NR > 1 && NR <= 13 { printf "  %7.2f MiB  %s\n", $1 / 1048576, $2 }' "$out/sizes.txt"
echo "gpu_bundle: $out holds $(mib "$total") MiB (limit $limit_mib MiB); sizes of every file in $out/sizes.txt"
awk -v b="$total" -v l="$limit_mib" 'BEGIN { exit !(b <= l * 1048576) }' ||
  fail "$(mib "$total") MiB is over the $limit_mib MiB limit"
