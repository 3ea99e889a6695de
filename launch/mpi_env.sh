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

# mpirun's flags for on_failure = shrink, in MIRRORED_FT_FLAGS: ULFM's fault tolerance, and
# no TCP keepalive between mpirun and its daemons. Open MPI 5.0's runtime (PRRTE 3.0) ends the
# whole job when it finds a daemon gone, and on a node that crashed or left the network the
# keepalive is what finds it (300 s idle, then 9 probes 20 s apart): the survivors, which
# shrank past the node's ranks long before, would be killed minutes into going on. Without
# it, mpirun waits for that node's ranks after mirrored has finished, and
# mirrored_wait_launcher ends it.
#
# mirrored_ft_flags PROGRAM sets them, and when PROGRAM is mirrored adds its rank agent as the
# daemons' exec agent (`mirrored rank-agent`, src/cli/rank_agent_command.cpp): PRRTE also ends
# the job when it loses a daemon (every process of a node killed while its kernel lives), and
# the agent keeps the survivors out of reach of that ending, which they outlive (they go on
# without mpirun; mirrored_wait_survivors then waits for them). PRRTE splits the agent's
# command at spaces: a path with a space goes without it (such a loss then ends the job).
mirrored_ft_flags() {
  local program path
  MIRRORED_FT_FLAGS=(--with-ft ulfm --prtemca oob_tcp_keepalive_time 0)
  export MIRRORED_RANK_AGENT=0
  program=$(command -v "$1" 2>/dev/null) || return 0
  [[ "$(basename "$program")" == mirrored ]] || return 0
  path=$(realpath "$program")
  if [[ "$path" == *" "* ]]; then
    echo "warning: '$path' has a space: no rank agent (a lost node's daemon will end the job)" >&2
    return 0
  fi
  MIRRORED_FT_FLAGS+=(--prtemca odls_base_exec_agent "$path rank-agent")
  export MIRRORED_RANK_AGENT=1
}

# mirrored_slurm_launcher PROGRAM ARGS...: for the sbatch scripts, given mirrored and its train
# arguments, sets `launcher` (MIRRORED_LAUNCHER, else srun) and `ft` (the mpirun flags). With
# on_failure = shrink, ft is mirrored_ft_flags's and the default launcher mpirun inside the
# allocation: under srun --mpi=pmix, Slurm's PMIx plugin kills the whole step (SIGKILL) when
# a rank dies, --kill-on-bad-exit=0 or not, and mirrored refuses shrink there.
mirrored_slurm_launcher() {
  local program=$1
  shift
  launcher=${MIRRORED_LAUNCHER:-srun}
  ft=()
  mirrored_wants_shrink "$@" || return 0
  mirrored_ft_flags "$program"
  ft=("${MIRRORED_FT_FLAGS[@]}")
  if [[ -z "${MIRRORED_LAUNCHER:-}" ]]; then
    launcher=mpirun
    echo "on_failure = shrink: launching with mpirun --with-ft ulfm inside the allocation" \
         "(under srun, Slurm's PMIx plugin ends the whole step when a rank dies)"
  fi
}

# mirrored's own exit status, seen through the launcher. With Open MPI 5.0, when a node is
# lost with its daemon, the runtime ends the job and mpirun can exit 0 although mirrored
# never finished. So the launch scripts hand the ranks MIRRORED_EXIT_STATUS_FILE, mirrored's
# chief writes its exit status there at exit, and the script compares.
#
# mirrored_expect_exit_status DIR PROGRAM: when PROGRAM is mirrored, export
# MIRRORED_EXIT_STATUS_FILE, a new empty file in DIR (one the chief's node must see at the
# same path: the run's working directory for a multi-node launch), or the path already in
# MIRRORED_EXIT_STATUS_FILE, emptied. Other programs do not write it: nothing to expect.
mirrored_expect_exit_status() {
  local dir=$1 program=$2
  MIRRORED_EXIT_STATUS_OURS=0
  [[ "$(basename "$program")" == mirrored ]] || { unset MIRRORED_EXIT_STATUS_FILE; return 0; }
  if [[ -n "${MIRRORED_EXIT_STATUS_FILE:-}" ]]; then
    : >"$MIRRORED_EXIT_STATUS_FILE" ||
      { echo "error: cannot write MIRRORED_EXIT_STATUS_FILE '$MIRRORED_EXIT_STATUS_FILE'" >&2; return 2; }
  else
    MIRRORED_EXIT_STATUS_FILE=$(mktemp "$dir/.mirrored-exit-status.XXXXXX") ||
      { echo "error: cannot create a file in '$dir' for mirrored's exit status (set MIRRORED_EXIT_STATUS_FILE)" >&2; return 2; }
    MIRRORED_EXIT_STATUS_OURS=1
  fi
  # Exported with it: slurm/preemptible.sh, exec'd by the sbatch scripts, removes the file.
  export MIRRORED_EXIT_STATUS_FILE MIRRORED_EXIT_STATUS_OURS
}

# mirrored_exit_status LAUNCHER STATUS: the status a launch script should exit with, given
# the launcher's STATUS, as the return value (0-255). A non-zero STATUS stands. A zero one
# stands only if mirrored's chief wrote 0; if it wrote nothing, the MPI runtime ended the job
# before mirrored finished: 9, saying so. Removes the file this script created.
# When ranks outlived the runtime (mirrored_wait_survivors), what their chief wrote stands
# whatever the launcher's own status.
MIRRORED_EXIT_RUNTIME_ENDED=9
mirrored_exit_status() {
  local launcher=$1 status=$2 reported="" survived=0
  [[ -n "${MIRRORED_EXIT_STATUS_FILE:-}" ]] || return "$status"
  mirrored_wait_survivors "$launcher" && survived=1
  reported=$(head -c 32 "$MIRRORED_EXIT_STATUS_FILE" 2>/dev/null | tr -dc '0-9')
  if [[ "${MIRRORED_EXIT_STATUS_OURS:-0}" == 1 ]]; then rm -f "$MIRRORED_EXIT_STATUS_FILE"; fi
  rm -f "$MIRRORED_EXIT_STATUS_FILE.out" "$MIRRORED_EXIT_STATUS_FILE.signals"
  if ((survived)) && [[ -n "$reported" ]]; then return $((10#$reported & 255)); fi
  ((status == 0)) || return "$status"
  if [[ -z "$reported" ]]; then
    echo "error: the MPI runtime ended the job before mirrored finished (a lost node's daemon?): $launcher" \
         "exited 0, but mirrored's chief wrote no exit status to MIRRORED_EXIT_STATUS_FILE" \
         "(${MIRRORED_EXIT_STATUS_FILE}); resume from the newest checkpoint by starting the job again" \
         "(exit $MIRRORED_EXIT_RUNTIME_ENDED)" >&2
    return "$MIRRORED_EXIT_RUNTIME_ENDED"
  fi
  if ((10#$reported != 0)); then
    echo "error: $launcher exited 0, but mirrored's chief exited $((10#$reported)): exiting with that" >&2
    return $((10#$reported & 255))
  fi
  return 0
}

# mirrored_wait_survivors LAUNCHER: after the launcher exited without mirrored's status.
# Ranks that outlive the MPI runtime (it ended the job on a lost node's daemon; see
# mirrored_ft_flags) touch MIRRORED_EXIT_STATUS_FILE every second while they run without it,
# and copy their output from the loss on to MIRRORED_EXIT_STATUS_FILE.out: this shows that
# output and waits until the chief writes its status, or until nobody touched the file for
# 5 s (survivors that died since). True when there were survivors. Only where the launch
# used the rank agent (MIRRORED_RANK_AGENT=1), which is what lets ranks outlive the runtime.
mirrored_wait_survivors() {
  local launcher=$1 file=$MIRRORED_EXIT_STATUS_FILE ended tail_pid=""
  [[ "${MIRRORED_RANK_AGENT:-0}" == 1 && ! -s "$file" ]] || return 1
  ended=$(date +%s)
  # Survivors learn that the runtime is gone as their node's daemon exits, about when mpirun
  # did, and touch the file within a second of it.
  while (($(mirrored_mtime "$file") < ended)) && (($(date +%s) - ended < 3)); do sleep 0.2; done
  (($(mirrored_mtime "$file") >= ended)) || return 1
  echo "warning: $launcher has exited: the MPI runtime ended the job after losing a node's daemon, but ranks" \
       "outlived it and go on without it; waiting for their chief's exit status in MIRRORED_EXIT_STATUS_FILE" \
       "($file; their output since the loss follows)" >&2
  touch "$file.out"
  tail -n +1 -f "$file.out" >&2 &
  tail_pid=$!
  while [[ ! -s "$file" ]] && (($(date +%s) - $(mirrored_mtime "$file") <= 5)); do sleep 0.2; done
  sleep 0.3  # the last lines
  kill "$tail_pid" 2>/dev/null || true
  wait "$tail_pid" 2>/dev/null || true
  [[ -s "$file" ]] ||
    echo "error: the ranks that outlived the MPI runtime stopped reporting without an exit status" >&2
  return 0
}

# mirrored_mtime FILE: its modification time in seconds since the epoch (0 when it is gone).
mirrored_mtime() { stat -c %Y "$1" 2>/dev/null || echo 0; }

# mirrored_launch LAUNCHER_COMMAND...: runs the command, forwards the signals a script
# receives (TERM, HUP, USR1, USR2; INT as TERM, since a command a script starts in the
# background ignores SIGINT) to it, and returns mirrored_exit_status's verdict.
mirrored_launch() {
  # The script's stdin, not /dev/null (what a background command gets), for mpirun to pass on.
  if { true <&0; } 2>/dev/null; then "$@" <&0 & else "$@" & fi
  local child=$! status=0 final=0 sig
  for sig in TERM HUP USR1 USR2; do
    # shellcheck disable=SC2064  # the child's pid, now
    trap "kill -s $sig $child 2>/dev/null || true; mirrored_relay_signal $sig" "$sig"
  done
  # shellcheck disable=SC2064
  trap "kill -s TERM $child 2>/dev/null || true; mirrored_relay_signal TERM" INT
  mirrored_wait_launcher "$child" "$(basename "$1")" || status=$?
  # The traps stay while survivors of a lost node may run on without the launcher.
  mirrored_exit_status "$(basename "$1")" "$status" || final=$?
  trap - TERM INT HUP USR1 USR2
  return "$final"
}

# mirrored_relay_signal SIG: for ranks that outlive the MPI runtime (mirrored_wait_survivors),
# which no launcher can signal any more: appends SIG's number to
# MIRRORED_EXIT_STATUS_FILE.signals, which they read every 100 ms and raise on themselves
# (a preemption warning, a TERM from an interrupted script). Ranks that still have their
# launcher get it from there; the file is read only by ranks whose launcher is gone, from its
# start (a TERM their agents held while the runtime was ending still reaches them).
mirrored_relay_signal() {
  [[ "${MIRRORED_RANK_AGENT:-0}" == 1 && -n "${MIRRORED_EXIT_STATUS_FILE:-}" ]] || return 0
  kill -l "$1" >>"$MIRRORED_EXIT_STATUS_FILE.signals" 2>/dev/null || true
}

# mirrored_wait_launcher PID NAME: waits for the launcher PID (a child of this shell) and
# returns its exit status. Traps set for signals run as soon as a signal arrives (it ends a
# wait early: the launcher is waited for again).
#
# Once mirrored's chief has written its exit status (MIRRORED_EXIT_STATUS_FILE), mirrored is
# done; a launcher still running MIRRORED_LAUNCHER_GRACE seconds later (default 30) waits for
# ranks the job lost and cannot end: with on_failure = shrink, Open MPI's mpirun waits for the
# ranks of a node that crashed or left the network (its daemon never answers again), and for
# stopped ranks on a host where no survivor was left to end them. A watcher then ends the
# launcher and every process it started here (ssh to the lost node, say), and the status is
# 0: mirrored_exit_status then goes by what the chief wrote.
mirrored_wait_launcher() {
  local child=$1 name=$2 status=0 watcher="" ended=""
  if [[ -n "${MIRRORED_EXIT_STATUS_FILE:-}" ]]; then
    ended="$MIRRORED_EXIT_STATUS_FILE.launcher-ended"
    rm -f "$ended"
    mirrored_end_lingering_launcher "$child" "$name" "${MIRRORED_LAUNCHER_GRACE:-30}" "$ended" &
    watcher=$!
  fi
  while kill -0 "$child" 2>/dev/null; do wait "$child" || true; done
  wait "$child" || status=$?
  if [[ -n "$watcher" ]]; then
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    if [[ -e "$ended" ]]; then
      rm -f "$ended"
      status=0
    fi
  fi
  return "$status"
}

# mirrored_end_lingering_launcher PID NAME GRACE MARKER: mirrored_wait_launcher's watcher, in
# the background. Creates MARKER when it ends the launcher.
mirrored_end_lingering_launcher() {
  local child=$1 name=$2 grace=$3 ended=$4 reported_at=""
  trap '' USR1 USR2 HUP  # preemption warnings are the launcher's, not the watcher's
  while kill -0 "$child" 2>/dev/null; do
    if [[ -s "$MIRRORED_EXIT_STATUS_FILE" ]]; then
      reported_at=${reported_at:-$SECONDS}
      if ((SECONDS - reported_at >= grace)); then
        echo "warning: mirrored finished (its chief wrote exit status $(head -c 32 "$MIRRORED_EXIT_STATUS_FILE" | tr -dc '0-9')), but $name" \
             "is still running ${grace} s later, waiting for ranks the job lost (a crashed or unreachable node, a stopped" \
             "rank): ending it (MIRRORED_LAUNCHER_GRACE)" >&2
        : >"$ended"
        mirrored_end_process_tree "$child"
        return 0
      fi
    fi
    sleep 0.5
  done
}

# The processes PID started, and theirs, here (ps --ppid, recursively).
mirrored_descendants() {
  local pid
  for pid in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$pid"
    mirrored_descendants "$pid"
  done
}

# mirrored_end_process_tree PID: SIGTERM to PID and its descendants, SIGKILL to what is
# left 5 s later.
mirrored_end_process_tree() {
  local root=$1 pids
  pids="$root $(mirrored_descendants "$root")"
  # shellcheck disable=SC2086  # a list of pids
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$root" 2>/dev/null || break
    sleep 0.1
  done
  # shellcheck disable=SC2086,SC2046  # lists of pids
  kill -KILL $pids $(mirrored_descendants "$root") 2>/dev/null || true
}
