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

# mirrored_spares ARGS...: prints how many hot spares a mirrored command line asks for
# (shrink.spares, by flag or in its --config file: `spares = K` under [shrink], or
# `shrink.spares = K`), 0 when none. The launch scripts start that many ranks beyond the NP
# they are given: the highest job ranks wait as spares (docs/checkpoints-and-failures.md).
mirrored_spares() {
  local previous="" arg spares=0 flag="" found
  for arg in "$@"; do
    case "$previous" in
      --shrink.spares) flag=$arg ;;
      --config)
        if [[ -r "$arg" ]]; then
          found=$(awk -F= '
            /^[[:space:]]*\[/ { section = $0; gsub(/[][[:space:]]/, "", section); next }
            { key = $1; gsub(/[[:space:]]/, "", key); value = $2; sub(/#.*/, "", value); gsub(/[[:space:]]/, "", value) }
            (section == "shrink" && key == "spares") || (section == "" && key == "shrink.spares") { print value }
          ' "$arg" | tail -1)
          [[ -n "$found" ]] && spares=$found
        fi ;;
    esac
    [[ "$arg" == --shrink.spares=* ]] && flag=${arg#--shrink.spares=}
    previous=$arg
  done
  spares=${flag:-$spares}  # a flag wins over the file, as in mirrored
  [[ "$spares" =~ ^[0-9]+$ ]] || { echo "launch: shrink.spares = '$spares': expected a count, 0 or more" >&2; return 2; }
  echo "$spares"
}

# mirrored_yield_when_oversubscribed RANKS CORES: more ranks on a host (spares included) than
# it has cores: Open MPI's ranks then yield the core while they wait in MPI
# (OMPI_MCA_mpi_yield_when_idle=1), unless the variable is set already (yours wins). By
# default a waiting rank spins, which is fastest with a core each; with more ranks than
# cores the spinners take the time slices the rank they wait for needs. On namespace hosts
# (6 ranks on 2 cores, tests/bench/chaos_spares.sh) spinning made the sgd mlp run 3 times
# slower (104 ms a step against 35, start-up included) and a replacement take 2.2-2.3 s
# against 0.4-0.9 s: in a recovery every survivor waits on one or two others at each round
# (shrink, agreement, new communicators over TCP). mpirun yields by itself when it knows it
# oversubscribes (more ranks than a host's slots); it cannot know when a hostfile's slots
# exceed the cores or when hosts share a machine's cores. mpirun passes OMPI_MCA_* on to
# every rank.
mirrored_yield_when_oversubscribed() {
  [[ -z "${OMPI_MCA_mpi_yield_when_idle:-}" ]] || return 0
  if (($1 > $2)); then export OMPI_MCA_mpi_yield_when_idle=1; fi
  return 0
}

# mirrored_slurm_most_tasks_per_node: the most tasks any node of this Slurm job runs, from
# SLURM_TASKS_PER_NODE ("4", or "2(x3),1": three nodes of 2, then one of 1).
mirrored_slurm_most_tasks_per_node() {
  tr ',' '\n' <<<"${SLURM_TASKS_PER_NODE:-1}" | sed 's/(.*//' | sort -n | tail -1
}

# mirrored_ranks_per_host HOSTFILE NP: the most ranks any host of HOSTFILE gets when NP
# ranks fill its slots host by host (--map-by slot; a line without slots= is one slot).
mirrored_ranks_per_host() {
  awk -v np="$2" '
    !/^[[:space:]]*(#|$)/ {
      slots = 1
      for (i = 2; i <= NF; i++) if ($i ~ /^(slots|max_slots)=/) { split($i, kv, "="); slots = kv[2] + 0; break }
      take = (np < slots) ? np : slots
      if (take > most) most = take
      np -= take
    }
    END { print most + 0 }
  ' "$1"
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

# Hot spares in a Slurm allocation, where a spare is usually a whole extra node:
# MIRRORED_SPARE_NODES=N keeps the allocation's last N nodes as spares (ask sbatch for N
# nodes more than train). mirrored_slurm_spare_args ARGS... (the mirrored command line) sets
# MIRRORED_SPARE_ARGS to the flags that say so (shrink.spares = N x tasks per node, and
# on_failure = shrink unless ARGS ask for it already): launched with
# mpirun, which fills nodes in order, the highest ranks, the last nodes' tasks, wait as
# spares and take a lost node's places in order (their local ranks, and so their GPUs, too).
mirrored_slurm_spare_args() {
  MIRRORED_SPARE_ARGS=()
  local nodes=${MIRRORED_SPARE_NODES:-0} per_node
  [[ "$nodes" =~ ^[0-9]+$ ]] || { echo "MIRRORED_SPARE_NODES='$nodes': expected a number of nodes" >&2; return 2; }
  ((nodes > 0)) || return 0
  per_node=${SLURM_NTASKS_PER_NODE:-$(( ${SLURM_NTASKS:-1} / ${SLURM_NNODES:-1} ))}
  per_node=${per_node%%(*}  # "4(x2)" when nodes differ: the first node's count
  if ((nodes >= ${SLURM_NNODES:-1})); then
    echo "MIRRORED_SPARE_NODES=$nodes: the allocation has ${SLURM_NNODES:-1} node(s); some must train" >&2
    return 2
  fi
  MIRRORED_SPARE_ARGS=(--shrink.spares $((nodes * per_node)))
  mirrored_wants_shrink "$@" || MIRRORED_SPARE_ARGS+=(--on_failure shrink)
  echo "hot spares: the last $nodes node(s), $((nodes * per_node)) rank(s), wait to replace lost ones"
}

# mirrored's own exit status, seen through the launcher. With Open MPI 5.0, when a node is
# lost with its daemon, the runtime ends the job and mpirun can exit 0 although mirrored
# never finished. So the launch scripts hand the ranks a run-state directory
# (MIRRORED_RUN_STATE_DIR), mirrored's chief writes its exit status there at exit, and the
# script compares. Its files steer the job (src/core/run_state.h):
#   exit-status      the chief's status        alive    touched by ranks that outlive mpirun
#   output           their output since then   signals  what this script relays to them
#   launcher-ended   this script's marker: it ended a launcher that lingered
# It sits where the chief's node sees it (the working directory of a multi-node launch,
# usually a shared file system others can write too), so: only this user may write it (a
# directory of mode 0700, never a symlink), the ranks refuse one that is not, and this script
# reaches its files through a descriptor opened once (/proc/$$/fd/N: a directory renamed
# away and replaced afterwards is never used).
#
# mirrored_prepare_run_state DIR PROGRAM: when PROGRAM is mirrored, exports
# MIRRORED_RUN_STATE_DIR, a new directory in DIR (mktemp -d: mode 0700), or the one the
# variable names already (created 0700 when missing; refused when it is a symlink, not a
# directory, not this user's or not of mode 0700), emptied of an earlier run's files.
# Other programs write no status: nothing to expect.
mirrored_prepare_run_state() {
  local dir=$1 program=$2 problem
  MIRRORED_RUN_STATE_OURS=0
  [[ "$(basename "$program")" == mirrored ]] || { unset MIRRORED_RUN_STATE_DIR; return 0; }
  if [[ -n "${MIRRORED_EXIT_STATUS_FILE:-}" ]]; then
    echo "error: MIRRORED_EXIT_STATUS_FILE is no longer read; set MIRRORED_RUN_STATE_DIR to a directory only you" \
         "can write (mode 0700), or leave both unset for a new one per run" >&2
    return 2
  fi
  if [[ -n "${MIRRORED_RUN_STATE_DIR:-}" ]]; then
    if [[ ! -e "$MIRRORED_RUN_STATE_DIR" && ! -L "$MIRRORED_RUN_STATE_DIR" ]]; then
      mkdir -m 700 -- "$MIRRORED_RUN_STATE_DIR" ||
        { echo "error: cannot create MIRRORED_RUN_STATE_DIR '$MIRRORED_RUN_STATE_DIR'" >&2; return 2; }
    fi
  else
    MIRRORED_RUN_STATE_DIR=$(mktemp -d "$dir/.mirrored-run.XXXXXX") ||
      { echo "error: cannot create a directory in '$dir' for mirrored's run state (set MIRRORED_RUN_STATE_DIR)" >&2; return 2; }
    MIRRORED_RUN_STATE_OURS=1
  fi
  problem=$(mirrored_run_state_problem "$MIRRORED_RUN_STATE_DIR") &&
    exec {MIRRORED_RUN_STATE_FD}<"$MIRRORED_RUN_STATE_DIR" &&
    problem=$(mirrored_run_state_problem "/proc/$$/fd/$MIRRORED_RUN_STATE_FD") ||
    { echo "error: MIRRORED_RUN_STATE_DIR '$MIRRORED_RUN_STATE_DIR': ${problem:-cannot open it}; refused" >&2; return 2; }
  mirrored_clear_run_state
  export MIRRORED_RUN_STATE_DIR MIRRORED_RUN_STATE_OURS MIRRORED_RUN_STATE_FD
}

# mirrored_run_state_problem PATH: fails, saying why, unless PATH is a directory (not a
# symlink) of this user with mode 0700.
mirrored_run_state_problem() {
  local owner mode
  if [[ "$1" != /proc/* && -L "$1" ]]; then echo "a symlink"; return 1; fi
  [[ -d "$1" ]] || { echo "not a directory"; return 1; }
  read -r owner mode < <(stat -L -c '%u %a' "$1")
  [[ "$owner" == "$(id -u)" ]] || { echo "owned by uid $owner, not by you (uid $(id -u))"; return 1; }
  [[ "$mode" == 700 ]] || { echo "mode $mode, expected 700 (only you may create, replace or read its files)"; return 1; }
}

# mirrored_state NAME: the path of run-state file NAME, through the descriptor opened once.
mirrored_state() { echo "/proc/$$/fd/$MIRRORED_RUN_STATE_FD/$1"; }

# mirrored_clear_run_state: removes the run-state files (a run's, or an earlier run's).
mirrored_clear_run_state() {
  local name
  for name in exit-status alive output signals launcher-ended resize lost-hosts; do rm -f -- "$(mirrored_state "$name")"; done
  rm -f -- "$(mirrored_state "")"exit-status.tmp.* 2>/dev/null || true
}

# mirrored_exit_status LAUNCHER STATUS: the status a launch script should exit with, given
# the launcher's STATUS, as the return value (0-255). A non-zero STATUS stands. A zero one
# stands only if mirrored's chief wrote 0; if it wrote nothing, the MPI runtime ended the job
# before mirrored finished: 9, saying so. Removes the run-state files (and the directory this
# script created).
# When ranks outlived the runtime (mirrored_wait_survivors), what their chief wrote stands
# whatever the launcher's own status.
MIRRORED_EXIT_RUNTIME_ENDED=9
mirrored_exit_status() {
  local launcher=$1 status=$2 reported="" survived=0
  [[ -n "${MIRRORED_RUN_STATE_DIR:-}" && -n "${MIRRORED_RUN_STATE_FD:-}" ]] || return "$status"
  mirrored_wait_survivors "$launcher" && survived=1
  reported=$(head -c 32 "$(mirrored_state exit-status)" 2>/dev/null | tr -dc '0-9')
  mirrored_clear_run_state
  if [[ "${MIRRORED_RUN_STATE_OURS:-0}" == 1 ]]; then rmdir -- "$MIRRORED_RUN_STATE_DIR" 2>/dev/null || true; fi
  if ((survived)) && [[ -n "$reported" ]]; then return $((10#$reported & 255)); fi
  ((status == 0)) || return "$status"
  if [[ -z "$reported" ]]; then
    echo "error: the MPI runtime ended the job before mirrored finished (a lost node's daemon?): $launcher" \
         "exited 0, but mirrored's chief wrote no exit status to the run-state directory" \
         "(MIRRORED_RUN_STATE_DIR ${MIRRORED_RUN_STATE_DIR}); resume from the newest checkpoint by starting the job" \
         "again (exit $MIRRORED_EXIT_RUNTIME_ENDED)" >&2
    return "$MIRRORED_EXIT_RUNTIME_ENDED"
  fi
  if ((10#$reported != 0)); then
    echo "error: $launcher exited 0, but mirrored's chief exited $((10#$reported)): exiting with that" >&2
    return $((10#$reported & 255))
  fi
  return 0
}

# mirrored_wait_survivors LAUNCHER: after the launcher exited.
# Ranks that outlive the MPI runtime (it ended the job on a lost node's daemon; see
# mirrored_ft_flags) touch the run-state file `alive` every second while they run without it,
# and copy their output from the loss on to `output`: this shows that output and waits until
# the chief writes its status, or until nobody touched `alive` for 5 s (survivors that died
# since); survivors that finished before the launcher exited only have their output shown.
# True when there were survivors. Only where the launch used the rank agent
# (MIRRORED_RANK_AGENT=1), which is what lets ranks outlive the runtime.
mirrored_wait_survivors() {
  local launcher=$1 status alive output ended tail_pid=""
  status=$(mirrored_state exit-status) alive=$(mirrored_state alive) output=$(mirrored_state output)
  [[ "${MIRRORED_RANK_AGENT:-0}" == 1 ]] || return 1
  # Only a file of ours is shown (the ranks never write through anything else).
  if [[ -L "$output" ]] || [[ -e "$output" && ! -O "$output" ]]; then rm -f -- "$output"; fi
  # The survivors may finish before the launcher gives up on the lost daemon: their output
  # since the loss then went only to `output`, and is shown here.
  if [[ -s "$status" ]]; then mirrored_show_finished_survivors "$launcher" "$output"; return; fi
  ended=$(date +%s)
  # Survivors learn that the runtime is gone from PMIx's lost-connection event, up to a
  # second or so after mpirun exited, and touch `alive` within a second of it. Survivors
  # that finish first (a few steps left, a fast recovery) never hear it: they write the
  # chief's status instead, and have their output shown as above.
  while (($(mirrored_mtime "$alive") < ended)) && [[ ! -s "$status" ]] && (($(date +%s) - ended < 3)); do
    sleep 0.2
  done
  if (($(mirrored_mtime "$alive") < ended)); then
    [[ -s "$status" ]] || return 1
    mirrored_show_finished_survivors "$launcher" "$output"
    return
  fi
  echo "warning: $launcher has exited: the MPI runtime ended the job after losing a node's daemon, but ranks" \
       "outlived it and go on without it; waiting for their chief's exit status in the run-state directory" \
       "(MIRRORED_RUN_STATE_DIR $MIRRORED_RUN_STATE_DIR; their output since the loss follows)" >&2
  tail -n +1 -F "$output" >&2 2>/dev/null &
  tail_pid=$!
  while [[ ! -s "$status" ]] && (($(date +%s) - $(mirrored_mtime "$alive") <= 5)); do sleep 0.2; done
  sleep 0.3  # the last lines
  kill "$tail_pid" 2>/dev/null || true
  wait "$tail_pid" 2>/dev/null || true
  [[ -s "$status" ]] ||
    echo "error: the ranks that outlived the MPI runtime stopped reporting without an exit status" >&2
  return 0
}

# mirrored_show_finished_survivors LAUNCHER OUTPUT: after the launcher exited, the chief's
# status written: the output the survivors copied to OUTPUT since the loss, said to be theirs.
# True when there is some (ranks outlived the runtime), else false (no loss, or none they saw).
mirrored_show_finished_survivors() {
  [[ -s "$2" ]] || return 1
  echo "warning: $1 has exited: the MPI runtime ended the job after losing a node's daemon, but ranks" \
       "outlived it and go on without it; they have finished (their output since the loss follows)" >&2
  cat -- "$2" >&2
  return 0
}

# mirrored_mtime FILE: its modification time in seconds since the epoch (0 when it is gone).
mirrored_mtime() { stat -c %Y "$1" 2>/dev/null || echo 0; }

# mirrored_preemption_signal ARGS...: the trainer's preemption_signal as it will read it
# from its command line: the last --preemption_signal flag, else the top-level key of its
# --config file, else USR1 (the default). MIRRORED_PREEMPTION_SIGNAL overrides.
mirrored_preemption_signal() {
  local signal="" config="" previous="" word
  for word in "$@"; do
    case "$previous" in
      --preemption_signal) signal=$word ;;
      --config) config=$word ;;
    esac
    case "$word" in
      --preemption_signal=*) signal=${word#*=} ;;
      --config=*) config=${word#*=} ;;
    esac
    previous=$word
  done
  if [[ -z "$signal" && -n "$config" && -r "$config" ]]; then
    # A top-level key: before the first [section].
    signal=$(sed -nE '/^\s*\[/q; s/^\s*preemption_signal\s*=\s*([A-Za-z0-9]+).*/\1/p' "$config" | tail -1)
  fi
  echo "${MIRRORED_PREEMPTION_SIGNAL:-${signal:-USR1}}"
}

# mirrored_launch LAUNCHER_COMMAND...: runs the command, forwards the signals a script
# receives (TERM, HUP, USR1, USR2) to it, and returns mirrored_exit_status's verdict.
# Ctrl-C (SIGINT; mpirun cannot pass SIGINT on, and ends the job on its own): the first asks
# mirrored to write a checkpoint and stop, by its preemption signal, as a time limit would;
# the script then exits 130 and the same command resumes the run. The second (or the first,
# with preemption_signal = none) ends the launcher at once (TERM). On a terminal the launcher
# runs in a process group of its own, so Ctrl-C reaches this script alone, which decides.
mirrored_launch() {
  local child status=0 final=0 sig interrupt
  interrupt=$(mirrored_preemption_signal "$@")
  MIRRORED_INTERRUPTS=0
  if [[ -t 0 || -t 1 || -t 2 ]]; then
    # A terminal's input cannot reach a background process group (it would stop mpirun).
    set -m
    if [[ -t 0 ]]; then mirrored_exec_launcher "$@" </dev/null & else mirrored_exec_launcher "$@" <&0 & fi
    child=$!
    set +m
  elif { true <&0; } 2>/dev/null; then
    # The script's stdin, not /dev/null (what a background command gets), for mpirun to pass on.
    mirrored_exec_launcher "$@" <&0 &
    child=$!
  else
    mirrored_exec_launcher "$@" &
    child=$!
  fi
  for sig in TERM HUP USR1 USR2; do
    # shellcheck disable=SC2064  # the child's pid, now
    trap "kill -s $sig $child 2>/dev/null || true; mirrored_relay_signal $sig" "$sig"
  done
  # shellcheck disable=SC2064
  trap "mirrored_interrupt $child $interrupt" INT
  mirrored_wait_launcher "$child" "$(basename "$1")" || status=$?
  # The traps stay while survivors of a lost node may run on without the launcher.
  mirrored_exit_status "$(basename "$1")" "$status" || final=$?
  trap - TERM INT HUP USR1 USR2
  if ((MIRRORED_INTERRUPTS > 0)); then
    if ((final == 7)); then
      echo "interrupted (Ctrl-C): mirrored wrote a checkpoint and stopped; run the same command again to resume" \
           "from it (exit 130)" >&2
    else
      echo "interrupted (Ctrl-C): $(basename "$1") ended (status $final); the run resumes from its newest checkpoint" \
           "when started again (exit 130)" >&2
    fi
    return 130
  fi
  return "$final"
}

# mirrored_exec_launcher COMMAND...: becomes COMMAND, without the run-state descriptor.
mirrored_exec_launcher() {
  if [[ -n "${MIRRORED_RUN_STATE_FD:-}" ]]; then exec "$@" {MIRRORED_RUN_STATE_FD}<&-; else exec "$@"; fi
}

# mirrored_interrupt CHILD SIGNAL: mirrored_launch's Ctrl-C (see there).
mirrored_interrupt() {
  local child=$1 signal=$2
  MIRRORED_INTERRUPTS=$((MIRRORED_INTERRUPTS + 1))
  if ((MIRRORED_INTERRUPTS == 1)) && [[ "$signal" != none ]]; then
    echo "interrupted (Ctrl-C): asking mirrored to write a checkpoint at the end of this step and stop (SIG$signal," \
         "its preemption signal); Ctrl-C again to stop at once" >&2
    kill -s "$signal" "$child" 2>/dev/null || true
    mirrored_relay_signal "$signal"
    return 0
  fi
  echo "interrupted (Ctrl-C): stopping at once" >&2
  kill -s TERM "$child" 2>/dev/null || true
  mirrored_relay_signal TERM
}

# mirrored_relay_signal SIG: for ranks that outlive the MPI runtime (mirrored_wait_survivors),
# which no launcher can signal any more: appends SIG's name to the run-state file `signals`,
# which they read every 100 ms and raise on themselves (a preemption warning, a TERM from an
# interrupted script; they act on TERM, INT, HUP, USR1 and USR2 only). Ranks that still have
# their launcher get it from there; the file is read only by ranks whose launcher is gone,
# from its start (a TERM their agents held while the runtime was ending still reaches them).
mirrored_relay_signal() {
  [[ "${MIRRORED_RANK_AGENT:-0}" == 1 && -n "${MIRRORED_RUN_STATE_FD:-}" ]] || return 0
  local signals
  signals=$(mirrored_state signals)
  # Only a file of ours is read by the ranks: anything else under the name goes first.
  if [[ -L "$signals" ]] || [[ -e "$signals" && ! -O "$signals" ]]; then rm -f -- "$signals"; fi
  printf '%s\n' "$1" >>"$signals" 2>/dev/null || true
}

# mirrored_wait_launcher PID NAME: waits for the launcher PID (a child of this shell) and
# returns its exit status. Traps set for signals run as soon as a signal arrives (it ends a
# wait early: the launcher is waited for again).
#
# Once mirrored's chief has written its exit status (run-state file exit-status), mirrored is
# done; a launcher still running MIRRORED_LAUNCHER_GRACE seconds later (default 30) waits for
# ranks the job lost and cannot end: with on_failure = shrink, Open MPI's mpirun waits for the
# ranks of a node that crashed or left the network (its daemon never answers again), and for
# stopped ranks on a host where no survivor was left to end them. A watcher then ends the
# launcher and every process it started here (ssh to the lost node, say), and the status is
# 0: mirrored_exit_status then goes by what the chief wrote.
mirrored_wait_launcher() {
  local child=$1 name=$2 status=0 watcher="" ended=""
  if [[ -n "${MIRRORED_RUN_STATE_FD:-}" ]]; then
    ended=$(mirrored_state launcher-ended)
    rm -f -- "$ended"
    mirrored_end_lingering_launcher "$child" "$name" "${MIRRORED_LAUNCHER_GRACE:-30}" "$ended" &
    watcher=$!
  fi
  while kill -0 "$child" 2>/dev/null; do wait "$child" || true; done
  wait "$child" || status=$?
  if [[ -n "$watcher" ]]; then
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    if [[ -e "$ended" ]]; then
      rm -f -- "$ended"
      status=0
    fi
  fi
  return "$status"
}

# mirrored_end_lingering_launcher PID NAME GRACE MARKER: mirrored_wait_launcher's watcher, in
# the background. Creates MARKER when it ends the launcher.
mirrored_end_lingering_launcher() {
  local child=$1 name=$2 grace=$3 ended=$4 reported_at="" status
  status=$(mirrored_state exit-status)
  trap '' USR1 USR2 HUP INT  # preemption warnings and Ctrl-C are the launcher's, not the watcher's
  while kill -0 "$child" 2>/dev/null; do
    if [[ -s "$status" ]]; then
      reported_at=${reported_at:-$SECONDS}
      # A job that stopped to grow back is relaunched at once: waiting for its lost ranks
      # would only add to the downtime (every survivor exits right after the chief).
      [[ "$(head -c 32 "$status" | tr -dc '0-9')" != "$MIRRORED_EXIT_RESIZE" ]] || grace=${MIRRORED_RESIZE_GRACE:-2}
      if ((SECONDS - reported_at >= grace)); then
        echo "warning: mirrored finished (its chief wrote exit status $(head -c 32 "$status" | tr -dc '0-9')), but $name" \
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

# Growing back (docs/checkpoints-and-failures.md#growing-back). A job that shrank under
# on_failure = shrink returns to its configured size by a restart: asked to (the run-state
# file `resize`: `mirrored resize RUN_DIR`, SIGURG to the launch script, or, for
# launch/multinode.sh, a lost host that answers again), it writes a checkpoint at the end of
# a step and exits 11, and the launch script starts the same command again, at the size it
# was given, which resumes from that checkpoint. The relaunched chief prints and records the
# downtime (the membership record's "grown").
MIRRORED_EXIT_RESIZE=11

# mirrored_launch_growing STATE_BASE LAUNCHER_COMMAND...: mirrored_launch, started again each
# time mirrored exits 11, with a new run-state directory in STATE_BASE (the first was made
# there by mirrored_prepare_run_state; one named by MIRRORED_RUN_STATE_DIR is reused).
# SIGURG asks the job to grow back. With MIRRORED_WATCH_HOSTFILE set (launch/multinode.sh),
# a watcher checks the hosts the job lost (mirrored_watch_lost_hosts). Returns the last
# launch's status.
mirrored_launch_growing() {
  local base=$1 status watcher launches=1
  shift
  trap 'mirrored_request_resize signal' URG
  while :; do
    watcher=""
    if [[ -n "${MIRRORED_WATCH_HOSTFILE:-}" && -n "${MIRRORED_RUN_STATE_FD:-}" ]]; then
      mirrored_watch_lost_hosts "$MIRRORED_WATCH_HOSTFILE" "${MIRRORED_HOST_CHECK_S:-10}" &
      watcher=$!
    fi
    status=0
    mirrored_launch "$@" || status=$?
    if [[ -n "$watcher" ]]; then mirrored_stop_watcher "$watcher"; fi
    if ((status != MIRRORED_EXIT_RESIZE)) || [[ -z "${MIRRORED_RUN_STATE_DIR:-}" ]]; then break; fi
    launches=$((launches + 1))
    echo "mirrored wrote a checkpoint and asked to grow back (exit $MIRRORED_EXIT_RESIZE): relaunching it at its" \
         "configured size (launch $launches); it resumes from that checkpoint and prints the downtime" >&2
    exec {MIRRORED_RUN_STATE_FD}<&-
    if [[ "${MIRRORED_RUN_STATE_OURS:-0}" == 1 ]]; then unset MIRRORED_RUN_STATE_DIR; fi
    mirrored_prepare_run_state "$base" mirrored || { status=$?; break; }
  done
  trap - URG
  return "$status"
}

# mirrored_request_resize TRIGGER: appends TRIGGER ("signal", "host-returned HOST") to the
# run-state file `resize`, which the chief reads (only a plain file of this user that no
# one else may write: anything else under the name goes first; created 0600).
mirrored_request_resize() {
  [[ -n "${MIRRORED_RUN_STATE_FD:-}" ]] || return 0
  local resize
  resize=$(mirrored_state resize)
  if [[ -L "$resize" ]] || [[ -e "$resize" && ! -O "$resize" ]]; then rm -f -- "$resize"; fi
  (umask 077 && printf '%s\n' "$1" >>"$resize") 2>/dev/null || true
  if [[ "$1" == signal ]]; then
    echo "SIGURG: asking mirrored to grow back to its configured size (a job at full size ignores it)" >&2
  fi
}

# mirrored_lost_hosts HOSTFILE: the hosts of the run-state file `lost-hosts` (the chief's: the
# hosts a shrink left without a rank) that HOSTFILE names, one a line. Only those are ever
# probed: the file steers what this script contacts, so it is an allow-list check, and a
# file that is not this user's is not read.
mirrored_lost_hosts() {
  local file host
  file=$(mirrored_state lost-hosts)
  [[ -f "$file" && ! -L "$file" && -O "$file" ]] || return 0
  while IFS= read -r host; do
    [[ "$host" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || continue
    if awk -v h="$host" '!/^[[:space:]]*#/ && $1 == h { found = 1 } END { exit !found }' "$1"; then echo "$host"; fi
  done <"$file"
}

# mirrored_host_answers HOST: true when HOST runs a command again through the remote shell
# the launch uses (MIRRORED_RSH_AGENT, else ssh without prompts), within 5 s.
mirrored_host_answers() {
  local agent=${MIRRORED_RSH_AGENT:-ssh} options=()
  [[ "$(basename "$agent")" == ssh ]] && options=(-o BatchMode=yes -o ConnectTimeout=4)
  timeout 5 "$agent" "${options[@]}" "$1" true </dev/null >/dev/null 2>&1
}

# mirrored_stop_watcher PID: ends the background watcher PID (a child of this shell) and what
# it runs now (a probe, a sleep), so nothing of it outlives the launch.
mirrored_stop_watcher() {
  # shellcheck disable=SC2046  # a list of pids
  kill "$1" $(mirrored_descendants "$1") 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# mirrored_watch_lost_hosts HOSTFILE PERIOD: in the background of a launch, every PERIOD
# seconds, probes each host the job lost (mirrored_lost_hosts); one that did not answer and
# then answers again asks the job to grow back ("host-returned HOST"), once per host. A host
# whose ranks died while it kept answering (a killed process, an OOM kill) is not a returned
# host: the job stays shrunk until asked otherwise.
mirrored_watch_lost_hosts() {
  local hostfile=$1 period=$2 host
  local -A down=() asked=()
  trap '' USR1 USR2 HUP INT URG  # the launch script's signals, not the watcher's
  while sleep "$period"; do
    for host in $(mirrored_lost_hosts "$hostfile"); do
      [[ -z "${asked[$host]:-}" ]] || continue
      if ! mirrored_host_answers "$host"; then
        down[$host]=1
      elif [[ -n "${down[$host]:-}" ]]; then
        asked[$host]=1
        echo "lost host $host answers again: asking mirrored to grow back to its configured size" >&2
        mirrored_request_resize "host-returned $host"
      fi
    done
  done
}
