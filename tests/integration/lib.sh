# shellcheck shell=bash
# Shared helpers for the integration scripts. Each script is one CTest test; it gets
# MIRRORED (the binary), COMPARE (compare_params) and DATA_DIR from CTest.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: "${MIRRORED:?MIRRORED must point at the mirrored binary}"
: "${DATA_DIR:?DATA_DIR must point at the imported Fashion-MNIST}"
# mpirun (and the ranks' OPAL_PREFIX) of the MPI the binary was built against, as the
# launch scripts choose it.
source "$SOURCE_DIR/launch/mpi_env.sh"
mirrored_mpi_for_launch "$MIRRORED"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-it.XXXXXX")
# end_jobs: SIGTERM to this script's background jobs that still run, so that a test failing
# while a job runs (a wait that timed out) leaves nothing behind: mpirun, timeout and the
# launch scripts pass the signal on to the ranks. Every trap on EXIT calls it.
end_jobs() {
  local pids
  pids=$(jobs -pr)
  # shellcheck disable=SC2086  # a list of pids
  [[ -z "$pids" ]] || kill $pids 2>/dev/null || true
}
trap 'end_jobs; rm -rf "$WORK"' EXIT

# fail MESSAGE: the test fails, saying why; first the file FAIL_SHOWS names, when a script sets
# it (the output of a job it waits for, which tells more than a timeout does).
fail() {
  if [[ -n "${FAIL_SHOWS:-}" && -f "$FAIL_SHOWS" ]]; then echo "--- $FAIL_SHOWS" >&2; cat "$FAIL_SHOWS" >&2; fi
  echo "FAIL: $*" >&2
  exit 1
}

# A small text corpus that needs no download, for language-model tests: this repository's
# documentation (about 180 KB).
# shellcheck disable=SC2034  # used by the scripts that source this file
DOCS_TEXT=("$SOURCE_DIR/README.md" "$SOURCE_DIR"/docs/*.md)

# The sgd mlp on Fashion-MNIST that the failure tests train (steps of milliseconds), one
# thread a rank, a record every 5 steps, no checkpoints but those the test makes: they add
# --batch_size, --max_steps and what they test.
# shellcheck disable=SC2034,SC2054  # used by the scripts; 256,128 is one value
FMNIST_MLP_ARGS=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --epochs 1 --model.hidden 256,128
                 --lr 0.05 --momentum 0.9 --seed 5 --threads 1 --log_every 5 --checkpoint.every_epochs 0
                 --progress plain)

require_data() {
  [[ -s "$DATA_DIR/train.h5" && -s "$DATA_DIR/test.h5" ]] ||
    { echo "SKIP: Fashion-MNIST not imported in $DATA_DIR (run launch/import_fmnist.sh)"; exit 77; }
}

# mpirun_np NP ARGS... : mirrored under mpirun, root-safe, oversubscribed.
mpirun_np() {
  local np=$1; shift
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$MIRRORED" "$@"
}

# require_ulfm: skip (exit 77) unless this binary was built against an MPI with ULFM (the
# Open MPI 5 of launch/install_openmpi.sh), which on_failure = shrink needs.
require_ulfm() {
  local info
  info=$("$MIRRORED" info 2>/dev/null) || fail "mirrored info failed"
  grep -q "^  ulfm  *available (" <<<"$info" ||
    { echo "SKIP: this binary has no ULFM (built against $(command -v mpirun)); launch/install_openmpi.sh + launch/build.sh"; exit 77; }
}

# ft_run NP ARGS...: `mirrored train ARGS` on NP local ranks under mpirun --with-ft ulfm (what
# on_failure = shrink needs), ended after 120 s (exit 124).
ft_run() {
  local np=$1; shift
  timeout -k 5 120 mpirun --with-ft ulfm --allow-run-as-root --oversubscribe --bind-to none -np "$np" \
    "$MIRRORED" train "$@"
}

# wait_until SECONDS WHAT COMMAND...: run COMMAND every 50 ms until it succeeds; fail naming
# WHAT when it has not within SECONDS.
wait_until() {
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after $limit s waiting for $what"
    sleep 0.05
  done
}

# wait_for FILE PATTERN WHAT [SECONDS]: until FILE has a line matching PATTERN (grep -E); fail
# naming WHAT after SECONDS (default 60).
wait_for() {
  wait_until "${4:-60}" "$3 (a line matching '$2' in $1)" grep -Eqs -- "$2" "$1"
}

# trained_to OUT STEP: whether OUT's metrics.jsonl has a train record at STEP or later (a
# recovery may skip a log point). A line still being written counts no further than it
# reads: a step number cut short is smaller.
trained_to() {
  awk -v step="$2" 'match($0, /"kind": "train", "step": [0-9]+,/) {
      if (substr($0, RSTART + 25, RLENGTH - 26) + 0 >= step) { found = 1; exit } }
    END { exit !found }' "$1/metrics.jsonl" 2>/dev/null
}

# last_step OUT: the step of the last train record in OUT's metrics.jsonl (0 without one).
last_step() {
  awk 'match($0, /"kind": "train", "step": [0-9]+,/) { step = substr($0, RSTART + 25, RLENGTH - 26) }
    END { print step + 0 }' "$1/metrics.jsonl" 2>/dev/null || echo 0
}

# wait_for_step OUT STEP [JOB]: until OUT's metrics.jsonl has a train record at STEP or later;
# at most 120 s. With JOB (the pid of the job's launcher, a child of this shell), fail at once
# if it ends first: the signal the caller sends next would land after the run.
wait_for_step() {
  wait_in_run "$1" "${3:-}" "a train record at step $2 or later" trained_to "$1" "$2"
}

# wait_for_start OUT [JOB]: until the run writing OUT has its metrics.jsonl, which the chief
# creates once MPI has started every rank (they can be looked up); at most 120 s; with JOB,
# fail at once if it ends first.
wait_for_start() {
  wait_in_run "$1" "${2:-}" "metrics.jsonl" test -e "$1/metrics.jsonl"
}

# wait_in_run OUT JOB WHAT COMMAND...: until COMMAND succeeds, at most 120 s; with JOB (not
# empty), fail showing the job's output as soon as JOB has ended.
wait_in_run() {
  local out=$1 job=$2 what=$3 deadline=$((SECONDS + 120))
  shift 3
  until "$@"; do
    if [[ -n "$job" ]] && ! kill -0 "$job" 2>/dev/null; then
      show_log "$out"; fail "$out: the job ended before $what"
    fi
    ((SECONDS < deadline)) || { show_log "$out"; fail "$out: no $what within 120 s"; }
    sleep 0.05
  done
}

# show_log OUT: print the job's output, which the scripts keep beside OUT as OUT.log (OUT.out
# for Slurm jobs), to stderr, if there is one.
show_log() {
  local log
  for log in "$1.log" "$1.out"; do
    if [[ -f "$log" ]]; then echo "--- $log" >&2; cat "$log" >&2; fi
  done
  return 0
}

# membership_records OUT: how many membership records OUT's metrics.jsonl holds (0 without one).
membership_records() {
  local n
  n=$(grep -cs '"kind": "membership"' "$1/metrics.jsonl") || true
  echo "${n:-0}"
}

# records_at_least OUT N: wait until OUT's metrics.jsonl holds N membership records (the Nth
# recovery is over: its first step wrote the record), so the next loss is its own recovery
# (a loss noticed while another's recovery is under way is handled with it, in one record);
# at most 60 s.
records_at_least() {
  wait_until 60 "$1: $2 membership record(s)" has_records "$1" "$2"
}
has_records() { (($(membership_records "$1") >= $2)); }

# rank_process OUT RANK: the pid of the mirrored process of rank RANK (as its launcher numbered
# it: PMIx's rank, or Open MPI's) of the run writing to OUT; the rank itself, never the rank
# agent that launch scripts start in its place under on_failure = shrink (`mirrored
# rank-agent ...`, which shares its command line and environment). Empty when there is none.
rank_process() {
  local pid comm words
  for pid in $(pgrep -f -- "--out $1( |$)"); do
    # Builtins where they do: on a loaded machine every process started here delays the signal.
    { read -r comm 2>/dev/null <"/proc/$pid/comm" && [[ $comm == mirrored ]]; } || continue
    mapfile -d '' -t words 2>/dev/null <"/proc/$pid/cmdline" || continue
    [[ " ${words[*]} " == *" rank-agent "* ]] && continue
    if grep -qzE "^(PMIX_RANK|OMPI_COMM_WORLD_RANK)=$2\$" "/proc/$pid/environ" 2>/dev/null; then echo "$pid"; return; fi
  done
}
# rank_pid OUT RANK: the former name of rank_process.
rank_pid() { rank_process "$@"; }

# signal_rank OUT RANK SIGNAL [PID]: send SIGNAL to rank RANK of the run writing OUT (to PID,
# when the caller looked it up before) and print its pid; fail when that rank is not running.
signal_rank() {
  local pid=${4:-}
  [[ -n "$pid" ]] || pid=$(rank_process "$1" "$2")
  [[ -n "$pid" ]] || fail "rank $2 of $1 not found"
  kill -"$3" "$pid"
  # Where the job was: a signal meant for mid-run that lands near the last step is a warning.
  echo "SIG$3 to rank $2 (pid $pid) of $1 at its train record of step $(last_step "$1")" >&2
  echo "$pid"
}

# signal_at_step OUT STEP RANK SIGNAL [JOB]: SIGNAL to rank RANK of the run writing OUT once
# it has trained to STEP (wait_for_step; with JOB, fail if the job ended first); prints the
# pid. The rank is looked up once the run has started, so that the signal follows the step's
# record within one poll: a lookup after it let the job run on (with a load of 12, a kill
# meant for step 10 of it.shrink_continue's 60 gave a membership record at step 51).
signal_at_step() {
  local pid
  wait_for_start "$1" "${5:-}"
  pid=$(rank_process "$1" "$3")
  [[ -n "$pid" ]] || fail "rank $3 of $1 not found"
  wait_for_step "$1" "$2" "${5:-}"
  signal_rank "$1" "$3" "$4" "$pid"
}

# kill_rank_at_step OUT STEP RANK [JOB]: kill -9 RANK of the run writing to OUT once it has
# trained to STEP.
kill_rank_at_step() {
  signal_at_step "$1" "$2" "$3" 9 "${4:-}" >/dev/null
}

# signal_after_record OUT N RANK SIGNAL: SIGNAL to rank RANK once OUT's metrics.jsonl has N
# membership records (records_at_least); prints the pid. The rank is looked up first, as in
# signal_at_step, so that the signal follows the record within one poll.
signal_after_record() {
  local pid
  pid=$(rank_process "$1" "$3")
  [[ -n "$pid" ]] || fail "rank $3 of $1 not found"
  records_at_least "$1" "$2"
  signal_rank "$1" "$3" "$4" "$pid"
}

# no_leftovers OUT: no process of the run writing OUT (its command line names --out OUT) is
# left once the job has ended; those still there after 10 s are killed and the test fails.
no_leftovers() {
  local left
  for _ in $(seq 100); do
    left=$(pgrep -f -- "--out $1( |$)" || true)
    [[ -z "$left" ]] && return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086  # a list of pids
  kill -9 $left 2>/dev/null || true
  fail "processes left behind by $1: $left"
}

# last_world_size OUT WORLD: the last train record of OUT's metrics.jsonl says world_size WORLD.
last_world_size() {
  [[ $(grep '"kind": "train"' "$1/metrics.jsonl" | tail -1 | grep -c "\"world_size\": $2[,}]") == 1 ]] ||
    fail "$1: the last train record does not say world_size $2"
}

# grown_record OUT FROM TO TRIGGER: print OUT's membership record of a growth from FROM to TO
# replicas asked for by TRIGGER (command, signal, host-returned); fail if there is none.
grown_record() {
  local grown
  grown=$(grep '"grown"' "$1/metrics.jsonl") || { cat "$1/metrics.jsonl"; fail "$1: no grown record"; }
  grep -Eq "\"world_size\": $3, \"lost\": \[\], \"grown\": \[\{\"from_world\": $2, \"to_world\": $3, \"downtime_s\": [0-9.e+-]+, \"trigger\": \"$4\", \"stopped_ms\": [0-9]+, \"first_step_ms\": [0-9]+\}\]" <<<"$grown" ||
    fail "$1: grown record: $grown"
  echo "$grown"
}

# Field of the last JSON line of FILE whose "kind" is KIND: json_field FILE KIND FIELD
json_field() {
  grep "\"kind\": \"$2\"" "$1" | tail -1 | sed -E "s/.*\"$3\": ([^,}]*).*/\1/"
}

# expect_failure NAME EXPECTED_TEXT MAX_SECONDS NP ARGS...
# `mirrored ARGS` on NP ranks must exit non-zero within MAX_SECONDS and print EXPECTED_TEXT.
expect_failure() {
  local name=$1 text=$2 max=$3 np=$4; shift 4
  local start=$SECONDS status=0
  timeout -k 5 $((max + 30)) mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" \
    "$MIRRORED" "$@" >"$WORK/$name.out" 2>&1 || status=$?
  local took=$((SECONDS - start))
  LAST_STATUS=$status
  [[ $status -ne 0 ]] || { cat "$WORK/$name.out"; fail "$name: exited 0"; }
  [[ $status -ne 124 && $status -ne 137 ]] || fail "$name: hung (killed by timeout after $took s)"
  grep -qF -- "$text" "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "$name: message lacks '$text'"; }
  ((took <= max)) || fail "$name: took $took s (limit $max s)"
  echo "ok: $name (exit $status, $took s): $(grep -F -- "$text" "$WORK/$name.out" | head -1)"
}

# expect_exit CODE NAME EXPECTED_TEXT MAX_SECONDS NP ARGS... : expect_failure, and the job's
# exit status must be CODE (the documented exit codes: 2 usage, 3 bad input, 4 checkpoint...).
expect_exit() {
  local code=$1; shift
  expect_failure "$@"
  [[ $LAST_STATUS -eq $code ]] || { cat "$WORK/$1.out"; fail "$1: exit status $LAST_STATUS, expected $code"; }
}

# metrics.jsonl without its timing fields (throughput, communication times) and timing
# records (straggler scores), which differ from run to run; everything left must be
# reproducible.
without_timings() {
  grep -vE '"kind": "(rank_scores|straggler)"' "$1" | sed -E 's/, "(samples_per_sec|comm_ms|exposed_comm_ms)": [^,}]*//g'
}
