# shellcheck shell=bash
# Sourced (bash): where this machine keeps the CUDA libraries a prebuilt mirrored links
# (launch/gpu_bundle.sh lists them in the bundle's manifest: libcudart.so.13, libcublas.so.13,
# libcublasLt.so.13, libcudnn.so.9, libnccl.so.2). A GPU image may have them in the CUDA
# toolkit, in the system loader's paths, or only in the Python wheels PyTorch installs:
# CUDA 13's wheels share site-packages/nvidia/cu13/lib (cudart, cuBLAS, ...), cuDNN and NCCL
# keep nvidia/cudnn/lib and nvidia/nccl/lib (CUDA 12's wheels: nvidia/<name>/lib each).
# The same rule as cmake/MirroredCuda.cmake's, for running rather than building.
#
#   find_cuda_libraries SONAME...   for each SONAME, the first folder that holds it, in this
#       order: MIRRORED_CUDA_LIBRARY_PATH (colon-separated, the user's word), the toolkit
#       (CUDA_HOME, CUDA_PATH, /usr/local/cuda: lib64, lib, targets/x86_64-linux/lib), the
#       folders of the system loader's cache (ldconfig -p), then the wheels' nvidia/*/lib
#       folders of MIRRORED_PYTHON (default python3; without a Python, site-packages folders
#       under /opt, /usr and /usr/local). Sets
#         CUDA_LIBRARY_DIRS    the folders found, colon-separated, in search order (for
#                              LD_LIBRARY_PATH)
#         CUDA_LIBRARY_REPORT  one line per SONAME: "SONAME FOLDER (WHERE)" or "SONAME missing"
#         CUDA_LIBRARY_MISSING the SONAMEs found nowhere (space-separated)
#       and returns 1 when one is missing.

# cuda_wheel_lib_dirs: the wheels' library folders (one per line).
cuda_wheel_lib_dirs() {
  local python=${MIRRORED_PYTHON:-python3} roots
  if command -v "$python" >/dev/null 2>&1; then
    roots=$("$python" - 2>/dev/null <<'EOF'
import importlib.util
try:
    spec = importlib.util.find_spec("nvidia")
except Exception:
    spec = None
for root in (spec.submodule_search_locations or []) if spec else []:
    print(root)
EOF
)
  fi
  if [[ -z "$roots" ]]; then
    roots=$(find /opt /usr/local/lib /usr/lib -maxdepth 6 -type d -path '*-packages/nvidia' 2>/dev/null)
  fi
  local root dir
  while read -r root; do
    [[ -n "$root" ]] || continue
    for dir in "$root"/*/lib; do [[ -d "$dir" ]] && echo "$dir"; done
  done <<<"$roots"
}

find_cuda_libraries() {
  CUDA_LIBRARY_DIRS="" CUDA_LIBRARY_REPORT="" CUDA_LIBRARY_MISSING=""
  local -a toolkit=() system=() wheels=() user=()
  local home
  for home in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    [[ -n "$home" ]] && toolkit+=("$home/lib64" "$home/lib" "$home/targets/x86_64-linux/lib")
  done
  [[ -n "${MIRRORED_CUDA_LIBRARY_PATH:-}" ]] && IFS=: read -r -a user <<<"$MIRRORED_CUDA_LIBRARY_PATH"
  mapfile -t system < <( { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } |
                         sed -nE 's/.* => (.*)\/[^/]+$/\1/p' | awk '!seen[$0]++')
  mapfile -t wheels < <(cuda_wheel_lib_dirs)
  local soname dir where found status=0
  for soname in "$@"; do
    found=""
    for where in user toolkit system wheels; do
      local -n dirs=$where
      for dir in "${dirs[@]}"; do
        if [[ -n "$dir" && -e "$dir/$soname" ]]; then found=$dir; break; fi
      done
      unset -n dirs
      [[ -n "$found" ]] && break
    done
    if [[ -z "$found" ]]; then
      CUDA_LIBRARY_REPORT+="$soname missing"$'\n'
      CUDA_LIBRARY_MISSING+="${CUDA_LIBRARY_MISSING:+ }$soname"
      status=1
      continue
    fi
    local label=$where
    [[ $where == user ]] && label=MIRRORED_CUDA_LIBRARY_PATH
    [[ $where == wheels ]] && label="a Python wheel"
    [[ $where == system ]] && label="the system loader's cache"
    [[ $where == toolkit ]] && label="the CUDA toolkit"
    CUDA_LIBRARY_REPORT+="$soname $found ($label)"$'\n'
    [[ ":$CUDA_LIBRARY_DIRS:" == *":$found:"* ]] || CUDA_LIBRARY_DIRS+="${CUDA_LIBRARY_DIRS:+:}$found"
  done
  CUDA_LIBRARY_REPORT=${CUDA_LIBRARY_REPORT%$'\n'}
  return $status
}
