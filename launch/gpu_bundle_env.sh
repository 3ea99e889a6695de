# shellcheck shell=bash
# Sourced (bash): unpacks a bundle of launch/gpu_bundle.sh on a GPU machine and makes its
# programs runnable there, without touching the image (nothing goes into /, and nothing is
# exported to the caller's other programs). Used by launch/gpu_selftest.sh --bundle and by
# the CI test tests/integration/gpu_bundle_relocation.sh, so the test checks the code the
# GPU run uses.
#
#   unpack_gpu_bundle BUNDLE DEST   unpacks BUNDLE/payload.tar.xz into DEST (xz, or Python's
#                                   lzma where the image has no xz); once per bundle
#   use_gpu_bundle BUNDLE DEST      checks the image's glibc against the bundle's manifest,
#       finds the CUDA libraries it names (launch/gpu_cuda_libs.sh), decides whether the
#       bundle's libstdc++ is needed (the image's lacks a GLIBCXX version the programs
#       need), and writes DEST/bin/{mirrored,unit_tests,mpi_tests,mpirun}: wrappers that
#       set LD_LIBRARY_PATH for that program alone (and OPAL_PREFIX for Open MPI), so the
#       image's own programs (python3, cmake) keep their own libraries. Sets
#         GPU_BUNDLE_LIBRARY_PATH   the bundle's folders, then the CUDA libraries' folders
#         GPU_BUNDLE_REPORT         lines saying what was found where
#         GPU_BUNDLE_ERROR          why it failed (returns 1)
# LD_LIBRARY_PATH rather than a RUNPATH: the programs keep the build's bits, and a library
# the bundle carries (libhdf5) finds the ones it needs (libcurl) the same way. Ranks started
# by the wrapped mpirun inherit it.

source "$(dirname "${BASH_SOURCE[0]}")/gpu_cuda_libs.sh"

unpack_gpu_bundle() {
  local bundle=$1 dest=$2
  case "$dest" in
    / | /usr | /usr/local | "") echo "unpack_gpu_bundle: refusing to unpack into '$dest'" >&2; return 1 ;;
  esac
  [[ -s "$bundle/payload.tar.xz" && -s "$bundle/manifest.txt" ]] ||
    { echo "unpack_gpu_bundle: $bundle has no payload.tar.xz and manifest.txt (made by launch/gpu_bundle.sh)" >&2; return 1; }
  local stamp
  stamp=$(stat -c '%s %Y' "$bundle/payload.tar.xz")
  [[ -f "$dest/.unpacked" && "$(cat "$dest/.unpacked")" == "$stamp" ]] && return 0
  rm -rf "$dest"
  mkdir -p "$dest"
  if command -v xz >/dev/null; then
    xz -dc "$bundle/payload.tar.xz" | tar -C "$dest" -xf - || return 1
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' \
      "$bundle/payload.tar.xz" | tar -C "$dest" -xf - || return 1
  fi
  echo "$stamp" >"$dest/.unpacked"
}

# version_at_least HAVE NEED
version_at_least() { [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1) == "$2" ]]; }

# The newest GLIBCXX version the loader's libstdc++.so.6 offers (empty without one).
image_glibcxx() {
  local lib
  lib=$({ ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | sed -nE 's/^\s*libstdc\+\+\.so\.6 .*x86-64.* => (.*)/\1/p' | head -1)
  [[ -n "$lib" && -r "$lib" ]] || return 0
  { grep -aoE 'GLIBCXX_[0-9]+(\.[0-9]+)+' "$lib" || true; } | sed 's/GLIBCXX_//' | sort -uV | tail -1
}

use_gpu_bundle() {
  local bundle=$1 dest=$2
  dest=$(cd "$dest" && pwd) || return 1
  GPU_BUNDLE_REPORT="" GPU_BUNDLE_ERROR="" GPU_BUNDLE_LIBRARY_PATH=""
  field() { sed -nE "s/^$1: //p" "$bundle/manifest.txt" | head -1; }
  local need_glibc need_glibcxx fallback_glibc have_glibc have_glibcxx
  need_glibc=$(field glibc) need_glibcxx=$(field glibcxx) fallback_glibc=$(field fallback_glibc)
  have_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  if [[ -n "$have_glibc" && -n "$need_glibc" ]] && ! version_at_least "$have_glibc" "$need_glibc"; then
    GPU_BUNDLE_ERROR="this image's glibc $have_glibc is older than the $need_glibc the bundle's programs need (made on $(field built_on)): make the bundle on a machine with an older glibc, or use --build"
    return 1
  fi
  local path="$dest/lib:$dest/openmpi/lib:$dest/openmpi/lib/openmpi"
  have_glibcxx=$(image_glibcxx)
  if [[ -n "$have_glibcxx" ]] && version_at_least "$have_glibcxx" "$need_glibcxx"; then
    GPU_BUNDLE_REPORT+="glibc $have_glibc (need $need_glibc), libstdc++ GLIBCXX $have_glibcxx (need $need_glibcxx): the image's"$'\n'
  elif [[ -n "$fallback_glibc" && -n "$have_glibc" ]] && version_at_least "$have_glibc" "$fallback_glibc"; then
    path="$dest/fallback:$path"
    GPU_BUNDLE_REPORT+="glibc $have_glibc (need $need_glibc), libstdc++ GLIBCXX ${have_glibcxx:-none} < $need_glibcxx: the bundle's libstdc++ is used"$'\n'
  else
    GPU_BUNDLE_ERROR="this image's libstdc++ (GLIBCXX ${have_glibcxx:-none}) is older than the $need_glibcxx the programs need, and its glibc $have_glibc cannot load the bundle's (needs $fallback_glibc)"
    return 1
  fi
  local -a sonames
  read -r -a sonames <<<"$(field cuda_libraries)"
  if ! find_cuda_libraries "${sonames[@]}"; then
    GPU_BUNDLE_ERROR="CUDA libraries not found: $CUDA_LIBRARY_MISSING (searched: MIRRORED_CUDA_LIBRARY_PATH, the toolkit under CUDA_HOME or /usr/local/cuda, the system loader's cache, and the nvidia/*/lib folders of ${MIRRORED_PYTHON:-python3}'s wheels; set MIRRORED_CUDA_LIBRARY_PATH)"
    return 1
  fi
  GPU_BUNDLE_REPORT+="CUDA libraries: $(sed -E 's/^([^ ]+) /\1 in /' <<<"$CUDA_LIBRARY_REPORT" | paste -sd';' | sed 's/;/; /g')"
  GPU_BUNDLE_LIBRARY_PATH=$path:$CUDA_LIBRARY_DIRS
  mkdir -p "$dest/bin"
  local program
  for program in mirrored unit_tests mpi_tests; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexport LD_LIBRARY_PATH\nexec %s "$@"\n' \
      "'$GPU_BUNDLE_LIBRARY_PATH'" "'$dest/libexec/$program'" >"$dest/bin/$program"
  done
  printf '#!/bin/sh\nOPAL_PREFIX=%s\nPATH=%s:$PATH\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexport OPAL_PREFIX PATH LD_LIBRARY_PATH\nexec %s "$@"\n' \
    "'$dest/openmpi'" "'$dest/openmpi/bin'" "'$GPU_BUNDLE_LIBRARY_PATH'" "'$dest/openmpi/bin/mpirun'" >"$dest/bin/mpirun"
  chmod +x "$dest"/bin/*
}
