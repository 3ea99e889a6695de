#!/usr/bin/env bash
# Part 1 of gpu_bundle_relocation.sh (not a test of its own): run in a private mount
# namespace, where it hides this machine's copies of what the bundle in WORK/gpu-bundle
# carries and offers the CUDA libraries only as PyTorch's wheels lay them out, then runs the
# bundle's programs as launch/gpu_selftest.sh --bundle does (launch/gpu_bundle_env.sh).
# usage: gpu_bundle_inside.sh SOURCE_DIR WORK MPI_PREFIX
set -euo pipefail
src=$1 work=$2 mpi_prefix=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*" >&2; exit 1; }
bundle=$work/gpu-bundle dest=$work/gpu-unpacked
source "$src/launch/gpu_bundle_env.sh"
unpack_gpu_bundle "$bundle" "$dest"
[[ -x "$dest/libexec/mirrored" && -d "$dest/openmpi/bin" ]] || fail "the payload did not unpack"

# The CUDA libraries: the toolkit's folder stays reachable at a second mount point, an empty
# folder is mounted over it, and the wheels' layout links into the second mount point.
cuda_lib=$(dirname "$(readlink -f "$(ldd "$dest/libexec/mirrored" | awk '$1 ~ /^libcudart/ { print $3 }')")")
[[ -d "$cuda_lib" ]] || fail "cannot tell where this machine's libcudart is"
mkdir -p "$work/real-cuda" "$work/empty"
mount --bind "$cuda_lib" "$work/real-cuda"
mount --bind "$work/empty" "$cuda_lib"
site=$work/site
mkdir -p "$site"/nvidia/{cu13,cudnn,nccl}/lib
for f in "$work"/real-cuda/*; do
  case "${f##*/}" in
    libcudart.so.* | libcublas.so.* | libcublasLt.so.*) ln -s "$f" "$site/nvidia/cu13/lib/" ;;
    libcudnn*.so.*) ln -s "$f" "$site/nvidia/cudnn/lib/" ;;
    libnccl.so.*) ln -s "$f" "$site/nvidia/nccl/lib/" ;;
  esac
done
! ls "$cuda_lib"/libcudart* >/dev/null 2>&1 || fail "the toolkit's libraries are still visible"

# This machine's copies of what the bundle carries: its Open MPI prefix, and every library in
# its lib/ wherever the loader would find it here, less those that this script's own tools
# and the Python that looks for the wheels load themselves (a GPU image has its own).
python=$(python3 -c 'import sys; print(sys.executable)')
keep=" $(for tool in "$python" bash awk sed grep tar xz sort paste env ls readlink cat mount; do
           ldd "$(command -v "$tool")" 2>/dev/null | awk '{print $1}'
         done | sort -u | paste -sd' ') "
declare -A hidden=()
kept=""
mount --bind "$work/empty" "$mpi_prefix"
for lib in "$dest"/lib/*; do
  name=${lib##*/}
  if [[ "$keep" == *" $name "* ]]; then kept+=" $name"; continue; fi
  for dir in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/local/lib; do
    [[ -e "$dir/$name" ]] || continue
    target=$(readlink -f "$dir/$name")
    [[ -n "${hidden[$target]:-}" ]] && continue
    mount --bind /dev/null "$target" && hidden[$target]=1
  done
done
echo "ok: the Open MPI prefix and ${#hidden[@]} system libraries the bundle carries hidden (left for this script's tools:${kept:- none}); the CUDA toolkit's libraries hidden"

# The discovery, as the self-test runs it: every CUDA library from the wheels.
PYTHONPATH=$site use_gpu_bundle "$bundle" "$dest" || fail "use_gpu_bundle: $GPU_BUNDLE_ERROR"
echo "$GPU_BUNDLE_REPORT"
for soname in $(sed -nE 's/^cuda_libraries: //p' "$bundle/manifest.txt"); do
  grep -qE "$soname in $site/nvidia/[a-z0-9]+/lib \(a Python wheel\)" <<<"$GPU_BUNDLE_REPORT" ||
    fail "$soname was not found in the wheels' layout"
done
echo "ok: the CUDA libraries found in the wheels' layout, cuBLAS in nvidia/cu13/lib"

# Every library of every program resolves inside the bundle or the wheels, or is the C/C++
# runtime every image has.
runtime='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libmvec|libstdc\+\+|libgcc_s)\.so'
for program in "$dest"/libexec/*; do
  while read -r name _ path _; do
    [[ "$name" =~ $runtime ]] && continue
    [[ "$path" == "$dest/"* || "$path" == "$site/"* ]] || fail "${program##*/}: $name resolves to ${path:-nothing}"
  done < <(env LD_LIBRARY_PATH="$GPU_BUNDLE_LIBRARY_PATH" ldd "$program" | grep '=>')
done
echo "ok: every library of mirrored, unit_tests and mpi_tests resolves inside the bundle or the wheels"

# The programs run.
"$dest/bin/mirrored" info >"$work/info.txt" 2>&1 || { cat "$work/info.txt"; fail "mirrored info failed"; }
grep -qE '^  cuda +built in' "$work/info.txt" || { cat "$work/info.txt"; fail "mirrored info: no CUDA row"; }
"$dest/bin/unit_tests" --gtest_color=no --gtest_filter='Config.*:ExactGrid.*:FusedAttentionShapes.*' >"$work/unit.txt" 2>&1 ||
  { tail -20 "$work/unit.txt"; fail "unit tests from the bundle failed"; }
unit=$(grep -c '^\[       OK \]' "$work/unit.txt" || true)
"$dest/bin/mpirun" --oversubscribe -np 2 "$dest/bin/mpi_tests" --gtest_color=no --gtest_filter='Collectives.*' >"$work/mpi.txt" 2>&1 ||
  { tail -20 "$work/mpi.txt"; fail "MPI tests from the bundle failed under its mpirun"; }
mpi=$(grep -c '^\[       OK \]' "$work/mpi.txt" || true)
((unit > 10 && mpi > 0)) || fail "only $unit unit and $mpi MPI tests passed"
data=$work/gpu-data
mkdir -p "$data"
for split in train:train t10k:test; do
  "$dest/bin/mirrored" data import-idx --images "$bundle/fmnist/${split%%:*}-images-idx3-ubyte.gz" \
    --labels "$bundle/fmnist/${split%%:*}-labels-idx1-ubyte.gz" --out "$data/${split##*:}.h5" >/dev/null
done
"$dest/bin/mpirun" --oversubscribe -np 2 "$dest/bin/mirrored" train --config "$src/launch/configs/fmnist_mlp.ini" \
  --data.train "$data/train.h5" --data.test "$data/test.h5" --device cpu --epochs 1 --max_steps 10 \
  --out "$work/gpu-train" >"$work/train.txt" 2>&1 || { tail -20 "$work/train.txt"; fail "training from the bundle failed"; }
grep -q '"kind": "eval"' "$work/gpu-train/metrics.jsonl" || fail "training from the bundle wrote no eval record"
echo "ok: from the bundle alone: mirrored info, $unit unit tests, $mpi MPI tests on 2 ranks, 10 training steps on 2 ranks"
