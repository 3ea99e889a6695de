#!/usr/bin/env bash
# Multi-node launch with Open MPI and a hostfile: one rank per slot, ranks filled host by
# host (ranks 0..k-1 on the first host), so consecutive ranks share a node as the
# hierarchical all-reduce expects.
# usage: launch/multinode.sh HOSTFILE NP PROGRAM [ARGS...]
#   HOSTFILE lines: "node1 slots=4"   (one slot per rank you want on that node)
#   launch/multinode.sh hosts.txt 8 build/mirrored train --config launch/configs/fmnist_mlp.ini
# NP ranks train; hot spares (--shrink.spares K, or spares = K under [shrink] in the
# --config file) add K ranks, the highest, so they fill the hostfile's last slots: list the
# spare nodes last (a spare node: as many slots as a training node, K = its slots).
# Every node needs the same paths (binary, data, run directory on a shared file system)
# and password-less ssh from the first node, unless MIRRORED_RSH_AGENT names another
# remote shell (the namespace tests use tests/netns/nsrsh).
# Environment:
#   MIRRORED_NET=10.0.0.0/24   keep MPI's TCP traffic on this network (the fast one, when
#                               nodes have several); default: Open MPI's choice
#   MIRRORED_RSH_AGENT=PATH    remote shell replacing ssh
#   MIRRORED_RUN_STATE_DIR=DIR  the run-state directory: where mirrored's chief writes its exit
#                               status (default: a new one in the working directory, mode
#                               0700, removed at the end; a directory named here must be
#                               yours and of mode 0700)
#   MIRRORED_LAUNCHER_GRACE=30  seconds mpirun may run on after mirrored's chief wrote its
#                               status (waiting for a crashed node's ranks) before it is ended
#   MIRRORED_RESIZE_GRACE=2     the same after the chief's exit 11 (growing back: relaunched)
#   MIRRORED_HOST_CHECK_S=10    seconds between probes of the hosts the job lost
#   MIRRORED_HOST_CORES=N       the cores of each host (default: this host's); when a host
#                               gets more ranks (spares included), Open MPI's waiting ranks
#                               yield their core (OMPI_MCA_mpi_yield_when_idle=1, unless set)
# Exit status: mirrored's (its chief's, also when ranks outlived a lost node's runtime; see
# mirrored_wait_survivors in launch/mpi_env.sh), else mpirun's; 9 when mpirun exited 0 but
# mirrored did not finish (the MPI runtime ended the job, e.g. on a lost node's daemon, and
# no ranks went on): resume from the newest checkpoint; 130 after Ctrl-C (a checkpoint first,
# as launch/local.sh).
# Growing back: when mirrored exits 11 (a job that lost ranks was asked to grow back:
# `mirrored resize RUN_DIR`, `kill -URG` on this script, or a host the job lost answers
# again), the same command is started again with NP ranks over HOSTFILE and resumes from the
# checkpoint it just wrote. Lost hosts are probed every MIRRORED_HOST_CHECK_S seconds (10)
# with `MIRRORED_RSH_AGENT HOST true` (ssh by default); only hosts of HOSTFILE are probed.
set -euo pipefail
if (($# < 3)); then
  echo "usage: launch/multinode.sh HOSTFILE NP PROGRAM [ARGS...]" >&2
  exit 2
fi
if [[ ! "$2" =~ ^[1-9][0-9]*$ ]]; then
  echo "launch/multinode.sh: NP = '$2': expected the number of ranks, a positive integer" >&2
  echo "usage: launch/multinode.sh HOSTFILE NP PROGRAM [ARGS...]" >&2
  exit 2
fi
hostfile=$1 np=$2
shift 2
[[ -r "$hostfile" ]] || { echo "launch/multinode.sh: cannot read hostfile '$hostfile'" >&2; exit 2; }
source "$(dirname "$0")/mpi_env.sh"

np=$((np + $(mirrored_spares "$@")))  # the spares are the highest ranks: the last slots
# More ranks on a host than it has cores: waiting ranks yield the core instead of spinning
# (mirrored_yield_when_oversubscribed). The hosts are taken to have this host's cores unless
# MIRRORED_HOST_CORES says otherwise.
mirrored_yield_when_oversubscribed "$(mirrored_ranks_per_host "$hostfile" "$np")" "${MIRRORED_HOST_CORES:-$(nproc)}"
flags=(--hostfile "$hostfile" -np "$np" --map-by slot --bind-to none)
# The mpirun of the MPI the program was built against. A relocated Open MPI (launch/
# install_openmpi.sh) must sit at the same path on every node; --prefix makes the remote
# daemons and ranks find it there.
mirrored_mpi_for_launch "$1"
if [[ -n "${OPAL_PREFIX:-}" ]]; then flags+=(--prefix "$OPAL_PREFIX"); fi
if mirrored_wants_shrink "$@"; then mirrored_ft_flags "$1"; flags+=("${MIRRORED_FT_FLAGS[@]}"); fi
# Ranks size their own thread pools (threads = cores / ranks on the node); core binding
# would squeeze a rank's BLAS threads onto one core.
if [[ $(id -u) -eq 0 ]]; then
  flags+=(--allow-run-as-root)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
if [[ -n "${MIRRORED_RSH_AGENT:-}" ]]; then flags+=(--mca plm_rsh_agent "$MIRRORED_RSH_AGENT"); fi
if [[ -n "${MIRRORED_NET:-}" ]]; then
  # tcp between nodes, shared memory (vader) inside a node, self for a rank to itself.
  flags+=(--mca btl tcp,vader,self --mca btl_tcp_if_include "$MIRRORED_NET" --mca oob_tcp_if_include "$MIRRORED_NET")
fi

# mirrored's chief writes its exit status to this run's run-state directory, in the working
# directory (which every node must see at the same path, as the run directory: after a shrink
# the chief may be on another node), or at MIRRORED_RUN_STATE_DIR. mpirun exits 0 when Open MPI's
# runtime ends the job on a lost node's daemon: with on_failure = shrink the survivors go on
# without it and this script waits for their chief's status; otherwise it exits 9, saying so.
mirrored_prepare_run_state "$PWD" "$1"

# Remote ranks start from a fresh login environment: forward what the program reads.
# (-x NAME exports the variable as set here; only names that are set are passed.)
for name in PATH LD_LIBRARY_PATH OPAL_PREFIX OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OPENBLAS_NUM_THREADS \
            OMP_NUM_THREADS CUDA_VISIBLE_DEVICES; do
  if [[ -n "${!name:-}" ]]; then flags+=(-x "$name"); fi
done
while IFS='=' read -r name _; do
  case "$name" in MIRRORED_*|NCCL_*|UCX_*) flags+=(-x "$name") ;; esac
done < <(env)

# Debugging, when needed (uncomment, or export before calling; NCCL_* and MIRRORED_* are
# forwarded to every rank):
#   export NCCL_DEBUG=INFO               # GPU jobs: NCCL's version, the rings/trees it built
#                                        # and the transport per peer (start here when a
#                                        # GPU job hangs at start-up or runs slowly)
#   export NCCL_DEBUG_SUBSYS=INIT,NET    # ...narrowed to set-up and the network plugin
#   export NCCL_SOCKET_IFNAME=eth0       # NCCL picked the wrong interface (docker0, lo)
#   export NCCL_IB_DISABLE=1             # rule out InfiniBand when IB errors appear
#   flags+=(--mca plm_base_verbose 10)   # remote daemons never start: the ssh command used
#   flags+=(--mca oob_base_verbose 10)   # daemons start but cannot call back to mpirun
#   flags+=(--mca btl_base_verbose 30)   # which transport (tcp/vader) each pair uses, and
#                                        # which interfaces tcp chose
#   flags+=(--mca coll_base_verbose 10)  # which collective algorithm runs (slow all-reduce)
#   flags+=(--report-bindings)           # where each rank is pinned
#   export MIRRORED_LOCAL_RANK=0         # pin the local rank when a launcher hides it
# shellcheck disable=SC2034  # read by mirrored_launch_growing
MIRRORED_WATCH_HOSTFILE=$hostfile  # the watcher of lost hosts (mirrored_launch_growing)
mirrored_launch_growing "$PWD" mpirun "${flags[@]}" "$@"
