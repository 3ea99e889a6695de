#!/usr/bin/env bash
# cmake/MirroredCuda.cmake finds cuDNN, NCCL and cuBLAS where a bare GPU image keeps them:
# only in the Python wheels nvidia-cudnn-cu13, nvidia-nccl-cu13 and nvidia-cublas, which hold
# site-packages/nvidia/{cudnn,nccl}/{include,lib} and, for CUDA 13's wheels, the shared
# nvidia/cu13/{include,lib}, with versioned libraries alone (libcudnn.so.9, libnccl.so.2,
# libcublas.so.13 beside libcublasLt.so.13). The test makes that layout with stand-in
# libraries (the real headers; a libcudnn.so.9 that, like cuDNN 9, loads a sibling engine
# library through its $ORIGIN RUNPATH; a libcublas.so.13 that needs its sibling
# libcublasLt.so.13), hides the CUDA folders' own cuDNN, NCCL and cuBLAS in a private mount
# namespace, and checks that CMake asks the Python on PATH, finds all three in the wheels,
# and that a program linked against them runs with no LD_LIBRARY_PATH. Without the wheels the
# same configure must fail with a message naming MIRRORED_PYTHON. Then the run-time
# discovery of a prebuilt bundle (launch/gpu_cuda_libs.sh) in the same layout: each library
# found in its wheel, libcudart (left in the toolkit here) in the toolkit, a missing one
# named.
# Skips (77) without a CUDA toolkit in /usr/local/cuda, root, or unshare.
source "$(dirname "$0")/lib.sh"
src=${SOURCE_DIR:?SOURCE_DIR must point at the source tree}
skip() { echo "SKIP: $*"; exit 77; }
cuda=$(readlink -f /usr/local/cuda 2>/dev/null)
[[ -x "$cuda/bin/nvcc" && -f "$cuda/include/cuda_runtime_api.h" ]] || skip "no CUDA toolkit in /usr/local/cuda"
[[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null && unshare -m true 2>/dev/null || skip "hiding the toolkit's cuDNN/NCCL needs root and unshare -m"
command -v python3 >/dev/null || skip "no python3"
command -v cc >/dev/null || skip "no C compiler"

# The wheels' layout, as the real packages' RECORD files list it.
site=$WORK/venv/lib/python3/site-packages
mkdir -p "$site"/nvidia/{cudnn,nccl,cu13}/{include,lib}
cp "$cuda"/include/cudnn*.h "$site/nvidia/cudnn/include/"
cp "$cuda"/include/nccl.h "$site/nvidia/nccl/include/"
cp "$cuda"/include/cublas*.h "$site/nvidia/cu13/include/"
cat >"$WORK/graph.c" <<'C'
unsigned long graph_version(void) { return 91900; }
C
cat >"$WORK/cudnn.c" <<'C'
#include <dlfcn.h>
#include <stddef.h>
/* cuDNN 9's shim loads its engines beside itself; so does this stand-in. */
size_t cudnnGetVersion(void) {
  void* graph = dlopen("libcudnn_graph.so.9", RTLD_NOW);
  if (!graph) return 1;
  unsigned long (*version)(void) = (unsigned long (*)(void))dlsym(graph, "graph_version");
  return version ? version() + 7 : 2;
}
C
cat >"$WORK/nccl.c" <<'C'
int ncclGetVersion(int* version) { *version = 22809; return 0; }
C
cat >"$WORK/cublaslt.c" <<'C'
int cublas_lt_stand_in(void) { return 13; }
C
cat >"$WORK/cublas.c" <<'C'
/* cublasGetVersion_v2(handle, &version), answered through the sibling libcublasLt. */
int cublas_lt_stand_in(void);
int cublasGetVersion_v2(void* handle, int* version) { (void)handle; *version = 130000 + cublas_lt_stand_in(); return 0; }
C
lib=$site/nvidia
cc -shared -fPIC -Wl,-soname,libcudnn_graph.so.9 -o "$lib/cudnn/lib/libcudnn_graph.so.9" "$WORK/graph.c"
cc -shared -fPIC -Wl,-soname,libcudnn.so.9 -Wl,--enable-new-dtags,-rpath,'$ORIGIN' -o "$lib/cudnn/lib/libcudnn.so.9" "$WORK/cudnn.c" -ldl
cc -shared -fPIC -Wl,-soname,libnccl.so.2 -o "$lib/nccl/lib/libnccl.so.2" "$WORK/nccl.c"
cc -shared -fPIC -Wl,-soname,libcublasLt.so.13 -o "$lib/cu13/lib/libcublasLt.so.13" "$WORK/cublaslt.c"
cc -shared -fPIC -Wl,-soname,libcublas.so.13 -Wl,--enable-new-dtags,-rpath,'$ORIGIN' -o "$lib/cu13/lib/libcublas.so.13" \
  "$WORK/cublas.c" "$lib/cu13/lib/libcublasLt.so.13"

mkdir -p "$WORK/project"
cat >"$WORK/project/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(discovery LANGUAGES C CXX)
set(MIRRORED_CUDA ON)
list(APPEND CMAKE_MODULE_PATH "$src/cmake")
include(MirroredCuda)
add_executable(probe probe.cpp)
target_include_directories(probe PRIVATE \${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(probe PRIVATE mirrored::cudnn mirrored::nccl mirrored::cublas)
CMAKE
cat >"$WORK/project/probe.cpp" <<'CPP'
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>
#include <cstdio>
int main() {
  int nccl = 0, cublas = 0;
  ncclGetVersion(&nccl);
  cublasGetVersion(nullptr, &cublas);
  std::printf("cudnn %zu nccl %d cublas %d\n", cudnnGetVersion(), nccl, cublas);
}
CPP

cat >"$WORK/inside.sh" <<'INSIDE'
set -euo pipefail
work=$1 cuda=$2 site=$3 src=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
# The toolkit's lib and include folders again, less cuDNN and NCCL: links to the originals
# (kept reachable at a second mount point) in folders mounted over the real ones.
for sub in lib include; do
  mkdir -p "$work/orig-$sub" "$work/view-$sub"
  mount --bind "$cuda/$sub" "$work/orig-$sub"
  for f in "$work/orig-$sub"/*; do
    case "${f##*/}" in libcudnn* | libnccl* | libcublas* | cudnn* | nccl* | cublas*) continue ;; esac
    ln -s "$f" "$work/view-$sub/${f##*/}"
  done
  mount --bind "$work/view-$sub" "$cuda/$sub"
done
! ls "$cuda"/lib/libcudnn* "$cuda"/lib/libnccl* "$cuda"/lib/libcublas* "$cuda"/include/cudnn.h "$cuda"/include/nccl.h \
  "$cuda"/include/cublas_v2.h 2>/dev/null || fail "the toolkit's cuDNN/NCCL/cuBLAS are still visible"
for d in /usr/lib/x86_64-linux-gnu /usr/include /usr/local/lib /usr/local/include; do
  ! ls "$d"/libcudnn.so* "$d"/libnccl.so* "$d"/libcublas.so* "$d"/cudnn.h "$d"/nccl.h "$d"/cublas_v2.h 2>/dev/null | grep -q . ||
    fail "a system cuDNN/NCCL/cuBLAS in $d would be found first"
done
echo "ok: the toolkit's cuDNN, NCCL and cuBLAS hidden"

# With the wheels importable by the Python on PATH (as a virtual environment makes them).
PYTHONPATH=$site cmake -S "$work/project" -B "$work/build" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configure with the wheels failed"; }
cache=$work/build/CMakeCache.txt
for pair in NCCL_LIBRARY:nccl/lib/libnccl.so.2 CUDNN_LIBRARY:cudnn/lib/libcudnn.so.9 \
            NCCL_INCLUDE_DIR:nccl/include CUDNN_INCLUDE_DIR:cudnn/include CUBLAS_LIBRARY:cu13/lib/libcublas.so.13 \
            CUBLASLT_LIBRARY:cu13/lib/libcublasLt.so.13 CUBLAS_INCLUDE_DIR:cu13/include; do
  var=${pair%%:*} want=$site/nvidia/${pair#*:}
  got=$(sed -nE "s/^$var:[A-Z]+=(.*)/\1/p" "$cache")
  [[ "$got" == "$want" ]] || fail "$var is '$got', expected $want"
  echo "ok: $var -> ${got#$work/}"
done
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "linking against the wheels' versioned libraries failed"; }
out=$(env -u LD_LIBRARY_PATH "$work/build/probe") || fail "the probe did not run: $out"
[[ "$out" == "cudnn 91907 nccl 22809 cublas 130013" ]] || fail "the probe printed '$out', expected the wheels' stand-ins"
echo "ok: linked by full path to libcudnn.so.9, libnccl.so.2 and libcublas.so.13; runs with no LD_LIBRARY_PATH ($out; libcudnn and libcublas found their siblings)"

# Without them: a clear failure that says where else to look.
if env -u PYTHONPATH cmake -S "$work/project" -B "$work/build-none" >"$work/none.log" 2>&1; then
  fail "configure succeeded with no cuDNN or NCCL anywhere"
fi
grep -q 'MIRRORED_PYTHON' "$work/none.log" && grep -q 'nvidia-cudnn-cu13' "$work/none.log" ||
  { cat "$work/none.log"; fail "the failure does not name MIRRORED_PYTHON and the wheels"; }
echo "ok: without the wheels, configure fails naming MIRRORED_PYTHON and the wheels"

# The run-time discovery of a prebuilt bundle, in the same layout: each library in its wheel's
# folder, libcudart in the toolkit (not hidden here: the toolkit comes first), a missing one
# named, and nothing without the wheels.
source "$src/launch/gpu_cuda_libs.sh"
status=0
PYTHONPATH=$site find_cuda_libraries libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2 || status=$?
echo "$CUDA_LIBRARY_REPORT"
[[ $status -eq 0 ]] || fail "find_cuda_libraries: missing $CUDA_LIBRARY_MISSING"
for pair in libcublas.so.13:cu13 libcublasLt.so.13:cu13 libcudnn.so.9:cudnn libnccl.so.2:nccl; do
  grep -qx "${pair%%:*} $site/nvidia/${pair#*:}/lib (a Python wheel)" <<<"$CUDA_LIBRARY_REPORT" ||
    fail "${pair%%:*} not found in nvidia/${pair#*:}/lib"
done
grep -qE "^libcudart.so.13 [^ ]+ \(the CUDA toolkit\)" <<<"$CUDA_LIBRARY_REPORT" || fail "libcudart not found in the toolkit"
[[ "$CUDA_LIBRARY_DIRS" == *"$site/nvidia/cu13/lib"*"$site/nvidia/cudnn/lib"* ]] || fail "the folders are '$CUDA_LIBRARY_DIRS'"
status=0
PYTHONPATH=$site find_cuda_libraries libcublas.so.13 libcusparse_not_there.so.1 || status=$?
[[ $status -eq 1 && "$CUDA_LIBRARY_MISSING" == libcusparse_not_there.so.1 ]] || fail "a missing library was not reported"
status=0
env -u PYTHONPATH MIRRORED_PYTHON=python3 bash -c "source '$src/launch/gpu_cuda_libs.sh'; find_cuda_libraries libcudnn.so.9" || status=$?
[[ $status -eq 1 ]] || fail "without the wheels, libcudnn.so.9 was found somewhere"
echo "ok: run-time discovery: cuBLAS, cuBLASLt, cuDNN and NCCL in their wheels, libcudart in the toolkit, a missing one named"
INSIDE
unshare -m --propagation private bash "$WORK/inside.sh" "$WORK" "$cuda" "$site" "$src" || fail "wheel discovery failed"
