# Sourced by the build and launch scripts: which MPI mirrored builds against and launches
# with. The default is the Open MPI 5 that launch/install_openmpi.sh puts in
# MIRRORED_MPI_PREFIX (it has ULFM, which `on_failure = shrink` needs); when that prefix is
# missing, or MIRRORED_MPI=system, the MPI on PATH (Debian's 4.1, a cluster's module).
#   MIRRORED_MPI=auto|prefix|system   (default auto: the prefix when installed)
#   MIRRORED_MPI_PREFIX=DIR           (default /opt/mirrored/openmpi-5.0.11)
: "${MIRRORED_MPI_PREFIX:=/opt/mirrored/openmpi-5.0.11}"
export MIRRORED_MPI_PREFIX

# mirrored_mpi_prefix_of PROGRAM: the prefix of the libmpi PROGRAM is linked with (empty if
# it is not a dynamically linked MPI program), so a launch uses the mpirun of the MPI the
# binary was built against, whatever MIRRORED_MPI says now.
mirrored_mpi_prefix_of() {
  local lib
  lib=$(ldd "$1" 2>/dev/null | sed -n 's/^\s*libmpi\.so[.0-9]* => \(\S*\) .*/\1/p' | head -1)
  [[ -n "$lib" ]] || return 0
  lib=$(readlink -f "$lib")
  # PREFIX/lib/libmpi.so.40 for a relocatable prefix; the system's lives in a multiarch
  # folder and its mpirun is on PATH already.
  local dir
  dir=$(dirname "$(dirname "$lib")")
  [[ -x "$dir/bin/mpirun" && -s "$dir/include/mpi-ext.h" ]] && echo "$dir"
  return 0
}

# mirrored_use_mpi_prefix DIR: mpirun, its daemons and the ranks come from DIR.
mirrored_use_mpi_prefix() {
  export OPAL_PREFIX=$1
  export PATH=$1/bin:$PATH
}

# mirrored_forget_mpi_prefix: undo mirrored_use_mpi_prefix (for a script that brings an
# Open MPI of its own, which would otherwise read this OPAL_PREFIX).
mirrored_forget_mpi_prefix() {
  if [[ -n "${OPAL_PREFIX:-}" ]]; then
    PATH=${PATH//"$OPAL_PREFIX/bin:"/}
    unset OPAL_PREFIX
  fi
}

# mirrored_mpi_for_build: the prefix to build against, or empty for the system MPI.
mirrored_mpi_for_build() {
  case "${MIRRORED_MPI:-auto}" in
    system) ;;
    prefix)
      [[ -x "$MIRRORED_MPI_PREFIX/bin/mpicc" ]] ||
        { echo "error: MIRRORED_MPI=prefix but $MIRRORED_MPI_PREFIX/bin/mpicc is missing (run launch/install_openmpi.sh)" >&2; return 1; }
      echo "$MIRRORED_MPI_PREFIX" ;;
    auto) if [[ -x "$MIRRORED_MPI_PREFIX/bin/mpicc" ]]; then echo "$MIRRORED_MPI_PREFIX"; fi ;;
    *) echo "error: MIRRORED_MPI must be auto, prefix or system, not '$MIRRORED_MPI'" >&2; return 1 ;;
  esac
}

# mirrored_mpi_for_launch PROGRAM: put the MPI that PROGRAM was built against on PATH.
mirrored_mpi_for_launch() {
  local p
  p=$(mirrored_mpi_prefix_of "$1")
  if [[ -n "$p" ]]; then mirrored_use_mpi_prefix "$p"; fi
}

# mirrored_wants_shrink ARGS...: true when a mirrored command line asks for
# on_failure = shrink, by flag or in its --config file; the launch then switches ULFM's
# fault tolerance on (mpirun --with-ft ulfm), which a run that aborts on failure leaves off.
mirrored_wants_shrink() {
  local previous="" arg
  for arg in "$@"; do
    case "$previous" in
      --on_failure) [[ "$arg" == shrink ]] && return 0 ;;
      --config) [[ -r "$arg" ]] && grep -Eq '^\s*on_failure\s*=\s*shrink\s*(#.*)?$' "$arg" && return 0 ;;
    esac
    [[ "$arg" == --on_failure=shrink ]] && return 0
    previous=$arg
  done
  return 1
}
