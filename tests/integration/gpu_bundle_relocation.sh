#!/usr/bin/env bash
# The GPU machine's bundles work from their own folders alone, as they must on a GPU machine
# whose image has no Open MPI, HDF5, Boost, OpenBLAS or oneDNN of its own.
#
# Part 1, the prebuilt programs (launch/gpu_bundle.sh, what `gpu_selftest.sh --bundle` runs):
# the bundle is made from this build (CI's `build`: its objects are reused, nothing is
# compiled again), holds sm_90 machine code and PTX for newer GPUs, and fits its size limit
# (the sizes are printed). Then, in a private mount namespace, the Open MPI prefix the
# programs were linked with, every system library the bundle carries (less those the Python
# that looks for the wheels needs itself) and the CUDA toolkit's libraries are hidden, and
# the CUDA libraries are offered only in the layout of PyTorch's wheels (nvidia/cu13/lib for
# cudart and cuBLAS, nvidia/cudnn/lib, nvidia/nccl/lib): the library discovery finds every
# one there, every library of the three programs resolves inside the bundle or the wheels
# (or the C/C++ runtime), `mirrored info` runs, a few unit tests pass, the MPI collective
# tests pass on 2 ranks under the bundle's mpirun, and 10 steps of training run on 2 ranks
# on the bundle's Fashion-MNIST subset.
#
# Part 2, the build dependencies (launch/gpu_build_deps.sh, for `--build --build-deps` on a
# bare image): the Debian packages are downloaded, unpacked into a temporary prefix and, with
# this machine's own copies hidden, an MPI program built with the relocated wrapper
# all-reduces the exact answer on 2 ranks under the relocated mpirun (and every shared object
# mpirun and the ranks map, PMIx, hwloc and libevent among them, comes from the prefix), every
# library of the prefix resolves its dependencies inside the prefix (or to the C/C++ runtime
# every image has), the glibc the packages need is recorded, and CMake configures mirrored
# against the prefix only.
# Each part skips, saying why, when it cannot run here (part 1: not a CUDA build, or built
# without the tests; part 2: no package mirror); both need root, unshare and the Fashion-MNIST
# IDX files (77 without them, or when neither part could run).
source "$(dirname "$0")/lib.sh"
src=${SOURCE_DIR:?SOURCE_DIR must point at the source tree}
build=$(dirname "$MIRRORED")
mpi_prefix=$(mirrored_mpi_prefix_of "$MIRRORED")
mirrored_forget_mpi_prefix  # the bundles' own Open MPI, not the one mirrored was built with

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null || skip "hiding the system copies needs root and unshare"
unshare -m true 2>/dev/null || skip "unshare -m is not permitted here"
idx=${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}
[[ -s "$idx/t10k-images-idx3-ubyte.gz" ]] || skip "no Fashion-MNIST IDX files in $idx (dataset-fashion-mnist)"
parts_run=0

# ---- part 1: the prebuilt programs ---------------------------------------------------------
part1_skip=""
if [[ "$(ldd "$MIRRORED")" != *libcudart.so* ]]; then
  part1_skip="$MIRRORED is not a CUDA build"
elif [[ ! -x "$build/tests/unit_tests" || ! -x "$build/tests/mpi_tests" ]]; then
  part1_skip="$build has no unit_tests and mpi_tests (configure with -DMIRRORED_BUILD_TESTS=ON)"
elif [[ -z "$mpi_prefix" ]]; then
  part1_skip="$MIRRORED is linked with a system MPI (launch/gpu_bundle.sh needs the relocatable Open MPI 5)"
fi
if [[ -n "$part1_skip" ]]; then
  echo "skip part 1: $part1_skip"
else
  start=$SECONDS
  TRAIN_IMAGES=2000 "$src/launch/gpu_bundle.sh" "$WORK/gpu-bundle" --build-dir "$build" >"$WORK/gpu-bundle.log" 2>&1 ||
    { cat "$WORK/gpu-bundle.log"; fail "launch/gpu_bundle.sh failed"; }
  cat "$WORK/gpu-bundle.log"
  took=$((SECONDS - start))
  manifest=$WORK/gpu-bundle/manifest.txt
  grep -qE '^gpu_code: .*sm_90 .*machine code; .*compute_[0-9]+ .*PTX' "$manifest" || fail "the bundle lacks sm_90 machine code or PTX: $(grep gpu_code "$manifest")"
  size=$(du -sb "$WORK/gpu-bundle" | cut -f1)
  ((size <= 60 * 1048576)) || fail "the bundle holds $size bytes, over 60 MiB"
  for f in payload.tar.xz manifest.txt sizes.txt fmnist/t10k-images-idx3-ubyte.gz; do
    [[ -s "$WORK/gpu-bundle/$f" ]] || fail "the bundle lacks $f"
  done
  echo "ok: bundle of $build's programs in $took s: $(grep '^gpu_code' "$manifest"), $((size / 1048576)) MiB of at most 60"
  unshare -m --propagation private bash "$src/tests/integration/gpu_bundle_inside.sh" "$src" "$WORK" "$mpi_prefix" ||
    fail "the prebuilt programs did not run from the bundle alone"
  parts_run=$((parts_run + 1))
fi

# ---- part 2: the build dependencies --------------------------------------------------------
if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  echo "skip part 2: no apt-get/dpkg (not a Debian machine)"
  ((parts_run > 0)) && exit 0
  skip "neither part could run here"
fi
start=$SECONDS
if ! GPU_BUNDLE_COMPRESS=none TRAIN_IMAGES=100 "$src/launch/gpu_build_deps.sh" "$WORK/bundle" >"$WORK/bundle.log" 2>&1; then
  if grep -qiE 'failed to fetch|unable to locate|could not resolve|temporary failure|unable to connect' "$WORK/bundle.log"; then
    tail -5 "$WORK/bundle.log"
    echo "skip part 2: apt-get download is not possible here (no package mirror)"
    ((parts_run > 0)) && exit 0
    skip "neither part could run here"
  fi
  cat "$WORK/bundle.log"; fail "launch/gpu_build_deps.sh failed"
fi
echo "ok: build dependencies packed in $((SECONDS - start)) s: $(tail -1 "$WORK/bundle.log")"
# The glibc the bundle needs is recorded, and this machine (Debian 12, where it was made) has it.
need=$(cat "$WORK/bundle/glibc.txt" 2>/dev/null)
have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
[[ "$need" =~ ^2\.[0-9]+ ]] || fail "glibc.txt holds '$need', not a glibc version"
[[ $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) == "$need" ]] || fail "the bundle needs glibc $need, this machine has $have"
echo "ok: the bundle needs glibc >= $need (this machine: $have)"

# Everything below runs in a private mount namespace with the system's copies hidden.
cat >"$WORK/inside.sh" <<'INSIDE'
set -euo pipefail
src=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
empty=$work/empty; mkdir -p "$empty"
hidden=0
hide() {  # hide PATH...: an empty folder over folders, /dev/null over files
  local p
  for p in "$@"; do
    [[ -e "$p" ]] || continue
    if [[ -d "$p" ]]; then mount --bind "$empty" "$p"; else mount --bind /dev/null "$p"; fi
    hidden=$((hidden + 1))
  done
}
sys=/usr/lib/x86_64-linux-gnu
hide $sys/openmpi /usr/share/openmpi /etc/openmpi $sys/hdf5 /usr/include/hdf5 /usr/include/boost \
     $sys/cmake/Boost-1.74.0 $sys/cmake/boost_program_options-1.74.0 $sys/cmake/GTest \
     $sys/openblas-pthread /usr/include/x86_64-linux-gnu/openblas-pthread \
     /usr/bin/mpirun /usr/bin/mpiexec /usr/bin/mpicc /usr/bin/mpicxx /usr/bin/orted /usr/bin/h5cc \
     $sys/libmpi.so* $sys/libopen-rte.so* $sys/libopen-pal.so* $sys/libhdf5_serial.so* \
     $sys/libboost_program_options.so* $sys/libopenblas.so* \
     $sys/libpmix.so* $sys/pmix2 $sys/libhwloc.so* $sys/hwloc $sys/libevent*.so* $sys/libucp.so* $sys/libuct.so* \
     $sys/libucs.so* $sys/libucm.so* $sys/ucx $sys/libfabric.so* $sys/libfabric $sys/libpsm2.so* $sys/libibverbs.so* \
     $sys/librdmacm.so* $sys/libnl-3.so* $sys/libnl-route-3.so* $sys/libmunge.so*
echo "ok: $hidden system paths hidden"
[[ ! -x /usr/bin/mpirun || ! -s /usr/bin/mpirun ]] || fail "system mpirun still visible"

source "$src/launch/gpu_prefix_env.sh"
unpack_gpu_prefix "$work/bundle" "$work/prefix"
use_gpu_prefix "$work/prefix"

# 1. An MPI program through the relocated wrapper and mpirun: exact sums on both ranks.
# Each rank also copies the memory maps of itself and of its parent (mpirun, which
# launched it) while both are live, after MPI_Init loaded its plugins: the test then reads
# which shared objects every process of the job really loaded.
cat >"$work/allreduce.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
static void copy_maps(pid_t pid, const char* out) {
  char path[64], line[4096];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE* in = fopen(path, "r");
  FILE* to = fopen(out, "w");
  while (in && to && fgets(line, sizeof line, in)) fputs(line, to);
  if (in) fclose(in);
  if (to) fclose(to);
}
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long values[3] = {rank + 1, 10 * (rank + 1), 1000003L * (rank + 1)};
  MPI_Allreduce(MPI_IN_PLACE, values, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d/%d sums %ld %ld %ld\n", rank, size, values[0], values[1], values[2]);
  if (argc > 1) {
    char out[4096];
    snprintf(out, sizeof out, "%s.rank%d", argv[1], rank);
    copy_maps(getpid(), out);
    snprintf(out, sizeof out, "%s.parent%d", argv[1], rank);
    copy_maps(getppid(), out);
  }
  MPI_Barrier(MPI_COMM_WORLD);  /* the parent is alive until every rank has copied */
  MPI_Finalize();
  return 0;
}
EOF
mpicc -O1 -o "$work/allreduce" "$work/allreduce.c"
# (ldd's output is read whole: grep -q closing the pipe early would fail it under pipefail)
deps=$(with_gpu_prefix ldd "$work/allreduce")
grep -q "libmpi.so.40 => $work/prefix/" <<<"$deps" || { echo "$deps"; fail "libmpi does not resolve into the prefix"; }
"$GPU_PREFIX_MPIRUN" --oversubscribe -np 2 "$work/allreduce" "$work/maps" >"$work/allreduce.out" 2>&1 || { cat "$work/allreduce.out"; fail "mpirun -np 2 failed"; }
for r in 0 1; do
  grep -qx "rank $r/2 sums 3 30 3000009" "$work/allreduce.out" || { cat "$work/allreduce.out"; fail "rank $r: wrong all-reduce"; }
done
echo "ok: relocated mpicc + mpirun: exact all-reduce on 2 ranks ($(ompi_info --version 2>/dev/null | head -1))"
# What the ranks and mpirun loaded: every shared object from the prefix, or the C/C++
# runtime a bare image has. PMIx, hwloc and libevent (and UCX or libfabric, where a plugin
# pulls them in) must be among them, from the prefix, with the system copies hidden above.
runtime='/(ld-linux[^/]*|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libresolv|libutil|libz)\.so[.0-9]*$'
loaded=$(cat "$work"/maps.rank* "$work"/maps.parent* 2>/dev/null | awk '$6 ~ /\.so/ { print $6 }' | sort -u)
[[ -n "$loaded" ]] || fail "the ranks wrote no memory maps"
outside=$(grep -v "^$work/prefix/" <<<"$loaded" | grep -vE "$runtime" || true)
[[ -z "$outside" ]] || { echo "$loaded"; fail "loaded from outside the prefix: $(echo $outside)"; }
for lib in libmpi.so libopen-pal.so libpmix.so libhwloc.so libevent_core; do
  grep -q "^$work/prefix/.*/$lib" <<<"$loaded" || { echo "$loaded"; fail "$lib was not loaded from the prefix"; }
done
echo "ok: mpirun and both ranks loaded $(wc -l <<<"$loaded") shared objects, every one from the prefix or the C/C++ runtime:" \
     "$(grep -oE '/(libpmix|libhwloc|libevent[a-z_-]*|libuc[pstm]|libfabric)[^/]*\.so[.0-9]*$' <<<"$loaded" | tr -d / | sort -u | paste -sd' ')"
[[ "${LD_LIBRARY_PATH:-}" != *"$work/prefix"* ]] || fail "use_gpu_prefix exported LD_LIBRARY_PATH"

# 2. HDF5, Boost.Program_options and OpenBLAS from the prefix: compile, link and run.
cat >"$work/libs.cpp" <<'EOF'
#include <cblas.h>
#include <hdf5.h>
#include <boost/program_options.hpp>
#include <cstdio>
int main(int argc, char** argv) {
  namespace po = boost::program_options;
  po::options_description desc;
  desc.add_options()("n", po::value<int>()->default_value(0), "");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  const float x[3] = {1, 2, 3}, y[3] = {4, 5, 6};
  std::printf("n=%d hdf5=%u.%u.%u dot=%g\n", vm["n"].as<int>(), major, minor, release, cblas_sdot(3, x, 1, y, 1));
  return 0;
}
EOF
p=$work/prefix/usr
mpicxx -std=c++20 -O1 $GPU_PREFIX_LINK_FLAGS -I"$p/include" -I"$p/include/hdf5/serial" -I"$p/include/x86_64-linux-gnu/openblas-pthread" \
  -o "$work/libs" "$work/libs.cpp" -L"$p/lib/x86_64-linux-gnu/hdf5/serial" -lhdf5 \
  -L"$p/lib/x86_64-linux-gnu" -lboost_program_options -L"$p/lib/x86_64-linux-gnu/openblas-pthread" -lopenblas
[[ $("$work/libs" --n 7) == 'n=7 hdf5=1.10.8 dot=32' ]] || { "$work/libs" --n 7; fail "HDF5/Boost/OpenBLAS program gave a wrong answer"; }
deps=$(ldd "$work/libs")
for dep in libhdf5_serial.so.103 libcurl.so.4 libboost_program_options.so.1.74.0 libopenblas.so.0; do
  grep -q "$dep => $work/prefix/" <<<"$deps" || { echo "$deps"; fail "$dep does not resolve into the prefix"; }
done
echo "ok: a program on HDF5, Boost.Program_options and OpenBLAS from the prefix builds and runs (no LD_LIBRARY_PATH: DT_RPATH)"

# 3. Every shared library in the prefix finds its dependencies in the prefix or in the C/C++
#    runtime (what a bare CUDA image has); a miss here would be a missing package.
base='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libresolv|libutil)\.so'
bad=""
for so in "$work"/prefix/usr/lib/x86_64-linux-gnu/{libmpi,libhdf5_serial,libboost_program_options,libcurl}.so.* \
          "$work"/prefix/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas*.so \
          "$work"/prefix/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_{btl_vader,btl_tcp,pml_ob1,coll_tuned}.so; do
  [[ -f "$so" && ! -L "$so" ]] || continue
  while read -r name _ path _; do
    [[ "$name" =~ $base ]] && continue
    [[ "$path" == "$work/prefix/"* ]] || bad+=" ${so##*/}:$name=>${path:-?}"
  done < <(with_gpu_prefix ldd "$so" | grep '=>')
done
[[ -z "$bad" ]] || fail "dependencies outside the prefix:$bad"
echo "ok: libmpi, libhdf5, Boost.Program_options, OpenBLAS, libcurl and Open MPI plugins resolve inside the prefix"

# 4. CMake configures mirrored against the prefix alone (CPU build: CUDA detection does not
#    depend on the prefix), and every dependency it found lies in the prefix.
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DMIRRORED_CUDA=OFF "${GPU_PREFIX_CMAKE_ARGS[@]}" \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure against the prefix failed"; }
cache=$work/build/CMakeCache.txt
for var in MPI_mpi_LIBRARY MPI_CXX_HEADER_DIR HDF5_C_INCLUDE_DIR HDF5_hdf5_LIBRARY_RELEASE Boost_DIR \
           boost_program_options_DIR BLAS_LIBRARIES MIRRORED_CBLAS_INCLUDE_DIR ZLIB_LIBRARY ZLIB_INCLUDE_DIR GTest_DIR; do
  value=$(sed -nE "s/^$var:[A-Z]+=(.*)/\1/p" "$cache" | head -1)
  [[ -z "$value" ]] && continue
  [[ "$value" == "$work/prefix/"* ]] || fail "CMake found $var=$value outside the prefix"
  echo "ok: $var -> ${value#$work/}"
done
grep -q "$work/prefix/" "$cache" || fail "CMakeCache names nothing in the prefix"
echo "ok: CMake configured mirrored against the prefix only"
INSIDE
unshare -m --propagation private bash "$WORK/inside.sh" "$src" "$WORK" || fail "relocation check failed"
echo "ok: build dependencies relocated, checked in $((SECONDS - start)) s"
