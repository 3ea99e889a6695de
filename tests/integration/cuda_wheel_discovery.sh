#!/usr/bin/env bash
# cmake/MirroredCuda.cmake finds cuDNN and NCCL where a bare GPU image keeps them: only in
# the Python wheels nvidia-cudnn-cu13 and nvidia-nccl-cu13, which hold
# site-packages/nvidia/{cudnn,nccl}/{include,lib} with versioned libraries alone
# (libcudnn.so.9, libnccl.so.2). The test makes that layout with stand-in libraries (the
# real headers; a libcudnn.so.9 that, like cuDNN 9, loads a sibling engine library through
# its $ORIGIN RUNPATH), hides the CUDA folders' own cuDNN and NCCL in a private mount
# namespace, and checks that CMake asks the Python on PATH, finds both in the wheels, and
# that a program linked against them runs with no LD_LIBRARY_PATH. Without the wheels the
# same configure must fail with a message naming MIRRORED_PYTHON.
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
mkdir -p "$site"/nvidia/{cudnn,nccl}/{include,lib}
cp "$cuda"/include/cudnn*.h "$site/nvidia/cudnn/include/"
cp "$cuda"/include/nccl.h "$site/nvidia/nccl/include/"
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
lib=$site/nvidia
cc -shared -fPIC -Wl,-soname,libcudnn_graph.so.9 -o "$lib/cudnn/lib/libcudnn_graph.so.9" "$WORK/graph.c"
cc -shared -fPIC -Wl,-soname,libcudnn.so.9 -Wl,--enable-new-dtags,-rpath,'$ORIGIN' -o "$lib/cudnn/lib/libcudnn.so.9" "$WORK/cudnn.c" -ldl
cc -shared -fPIC -Wl,-soname,libnccl.so.2 -o "$lib/nccl/lib/libnccl.so.2" "$WORK/nccl.c"

mkdir -p "$WORK/project"
cat >"$WORK/project/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(discovery LANGUAGES C CXX)
set(MIRRORED_CUDA ON)
list(APPEND CMAKE_MODULE_PATH "$src/cmake")
include(MirroredCuda)
add_executable(probe probe.cpp)
target_include_directories(probe PRIVATE \${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(probe PRIVATE mirrored::cudnn mirrored::nccl)
CMAKE
cat >"$WORK/project/probe.cpp" <<'CPP'
#include <cudnn.h>
#include <nccl.h>
#include <cstdio>
int main() {
  int nccl = 0;
  ncclGetVersion(&nccl);
  std::printf("cudnn %zu nccl %d\n", cudnnGetVersion(), nccl);
}
CPP

cat >"$WORK/inside.sh" <<'INSIDE'
set -euo pipefail
work=$1 cuda=$2 site=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
# The toolkit's lib and include folders again, less cuDNN and NCCL: links to the originals
# (kept reachable at a second mount point) in folders mounted over the real ones.
for sub in lib include; do
  mkdir -p "$work/orig-$sub" "$work/view-$sub"
  mount --bind "$cuda/$sub" "$work/orig-$sub"
  for f in "$work/orig-$sub"/*; do
    case "${f##*/}" in libcudnn* | libnccl* | cudnn* | nccl*) continue ;; esac
    ln -s "$f" "$work/view-$sub/${f##*/}"
  done
  mount --bind "$work/view-$sub" "$cuda/$sub"
done
! ls "$cuda"/lib/libcudnn* "$cuda"/lib/libnccl* "$cuda"/include/cudnn.h "$cuda"/include/nccl.h 2>/dev/null ||
  fail "the toolkit's cuDNN/NCCL are still visible"
for d in /usr/lib/x86_64-linux-gnu /usr/include /usr/local/lib /usr/local/include; do
  ! ls "$d"/libcudnn.so* "$d"/libnccl.so* "$d"/cudnn.h "$d"/nccl.h 2>/dev/null | grep -q . ||
    fail "a system cuDNN/NCCL in $d would be found first"
done
echo "ok: the toolkit's cuDNN and NCCL hidden"

# With the wheels importable by the Python on PATH (as a virtual environment makes them).
PYTHONPATH=$site cmake -S "$work/project" -B "$work/build" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configure with the wheels failed"; }
cache=$work/build/CMakeCache.txt
for pair in NCCL_LIBRARY:nccl/lib/libnccl.so.2 CUDNN_LIBRARY:cudnn/lib/libcudnn.so.9 \
            NCCL_INCLUDE_DIR:nccl/include CUDNN_INCLUDE_DIR:cudnn/include; do
  var=${pair%%:*} want=$site/nvidia/${pair#*:}
  got=$(sed -nE "s/^$var:[A-Z]+=(.*)/\1/p" "$cache")
  [[ "$got" == "$want" ]] || fail "$var is '$got', expected $want"
  echo "ok: $var -> ${got#$work/}"
done
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "linking against the wheels' versioned libraries failed"; }
out=$(env -u LD_LIBRARY_PATH "$work/build/probe") || fail "the probe did not run: $out"
[[ "$out" == "cudnn 91907 nccl 22809" ]] || fail "the probe printed '$out', expected the wheels' stand-ins"
echo "ok: linked by full path to libcudnn.so.9 and libnccl.so.2; runs with no LD_LIBRARY_PATH ($out; libcudnn found its sibling)"

# Without them: a clear failure that says where else to look.
if env -u PYTHONPATH cmake -S "$work/project" -B "$work/build-none" >"$work/none.log" 2>&1; then
  fail "configure succeeded with no cuDNN or NCCL anywhere"
fi
grep -q 'MIRRORED_PYTHON' "$work/none.log" && grep -q 'nvidia-cudnn-cu13' "$work/none.log" ||
  { cat "$work/none.log"; fail "the failure does not name MIRRORED_PYTHON and the wheels"; }
echo "ok: without the wheels, configure fails naming MIRRORED_PYTHON and the wheels"
INSIDE
unshare -m --propagation private bash "$WORK/inside.sh" "$WORK" "$cuda" "$site" || fail "wheel discovery failed"
