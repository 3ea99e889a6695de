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
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# A small text corpus that needs no download, for language-model tests: this repository's
# documentation (about 180 KB).
DOCS_TEXT=("$SOURCE_DIR/README.md" "$SOURCE_DIR"/docs/*.md)

require_data() {
  [[ -s "$DATA_DIR/train.h5" && -s "$DATA_DIR/test.h5" ]] ||
    { echo "SKIP: Fashion-MNIST not imported in $DATA_DIR (run launch/import_fmnist.sh)"; exit 77; }
}

# mpirun_np NP ARGS... : mirrored under mpirun, root-safe, oversubscribed.
mpirun_np() {
  local np=$1; shift
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$MIRRORED" "$@"
}

# rank_pid OUT RANK: the pid of the mirrored process of rank RANK (as its launcher numbered
# it: PMIx's rank, or Open MPI's) of the run writing to OUT.
rank_pid() {
  local pid
  for pid in $(pgrep -f -- "--out $1( |$)"); do
    [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == mirrored ]] || continue
    if grep -qzE "^(PMIX_RANK|OMPI_COMM_WORLD_RANK)=$2\$" "/proc/$pid/environ" 2>/dev/null; then echo "$pid"; return; fi
  done
}

# kill_rank_at_step OUT STEP RANK: kill -9 RANK of the run writing to OUT once its
# metrics.jsonl has a train record at STEP.
kill_rank_at_step() {
  local out=$1 step=$2 rank=$3 pid
  for _ in $(seq 600); do
    grep -q "\"kind\": \"train\", \"step\": $step," "$out/metrics.jsonl" 2>/dev/null && break
    sleep 0.05
  done
  pid=$(rank_pid "$out" "$rank")
  [[ -n "$pid" ]] || fail "rank $rank of $out not found"
  kill -9 "$pid"
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
