#!/usr/bin/env bash
# Single-node launch: one rank per process slot, root-safe flags, binding left to mirrored.
# usage: launch/local.sh NP PROGRAM [ARGS...]
#   launch/local.sh 2 build/mirrored train --config launch/configs/fmnist_mlp.ini
# NP ranks train; with hot spares (--shrink.spares K, or spares = K under [shrink] in the
# --config file) K more are started, which wait to take a lost rank's place.
# Exit status: mirrored's (its chief's), else mpirun's; 9 when mpirun exited 0 but mirrored
# did not finish (its chief wrote no status to its run-state directory: the MPI runtime
# ended the job); 130 after Ctrl-C (the first asks mirrored to write a checkpoint and stop,
# the second stops it at once; the same command resumes).
set -euo pipefail
usage() {
  echo "usage: launch/local.sh NP PROGRAM [ARGS...]   (NP: the number of ranks, e.g." >&2
  echo "       launch/local.sh 2 build/mirrored train --config launch/configs/fmnist_mlp.ini)" >&2
  exit 2
}
if (($# < 2)); then usage; fi
if [[ ! "$1" =~ ^[1-9][0-9]*$ ]]; then
  echo "launch/local.sh: NP = '$1': expected the number of ranks, a positive integer" >&2
  usage
fi
source "$(dirname "$0")/mpi_env.sh"
np=$1
shift
# The mpirun of the MPI the program was built against (launch/install_openmpi.sh's Open MPI
# 5 by default; the system's when built with MIRRORED_MPI=system).
mirrored_mpi_for_launch "$1"
np=$((np + $(mirrored_spares "$@")))  # the spares are the highest ranks
flags=(-np "$np" --bind-to none)
if mirrored_wants_shrink "$@"; then mirrored_ft_flags "$1"; flags+=("${MIRRORED_FT_FLAGS[@]}"); fi
# Ranks set their own thread counts (threads = cores / local ranks) and bind themselves to
# disjoint cores (bind_cores = auto), so Open MPI's default core binding, which would pin
# a rank's BLAS threads to one core, is switched off here. A launcher binding (--bind-to
# core) gives ranks different masks, and mirrored then leaves it as it is.
if [[ $(id -u) -eq 0 ]]; then flags+=(--allow-run-as-root); fi
if ((np > $(nproc))); then flags+=(--oversubscribe); fi
# More ranks than cores (spares included): waiting ranks yield the core instead of spinning
# (mpirun would do so itself, knowing it oversubscribes; said here for every Open MPI).
mirrored_yield_when_oversubscribed "$np" "$(nproc)"
# Debugging, when needed:
#   export OMPI_MCA_btl_base_verbose=30   # which transport each pair of ranks uses
#   export OMPI_MCA_coll_base_verbose=10  # which collective algorithm runs
#   export MIRRORED_LOCAL_RANK=0          # pin the local rank when a launcher hides it
# mirrored's chief writes its exit status to this run's run-state directory (a new one in
# TMPDIR, mode 0700, or MIRRORED_RUN_STATE_DIR): mpirun's own status can be 0 when Open MPI's
# runtime ended the job before mirrored finished (exit 9 then, saying so).
mirrored_prepare_run_state "${TMPDIR:-/tmp}" "$1"
mirrored_launch_growing "${TMPDIR:-/tmp}" mpirun "${flags[@]}" "$@"
