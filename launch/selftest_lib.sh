# shellcheck shell=bash
# Sourced (bash): the step runner of launch/gpu_selftest.sh. Each step is a command run under
# its own `timeout`; a step that fails or runs out of time is recorded and the next one runs
# all the same, so one run reports everything that is wrong. Tested on CPU by
# tests/integration/gpu_selftest_script.sh.
#
#   selftest_init LOGDIR          start the clock; logs and notes go under LOGDIR
#   run_step NAME LIMIT CMD...    CMD (output in LOGDIR/NAME.log) under `timeout LIMIT`; its
#                                 notes (what `note` wrote while it ran) are printed after it
#   not_run NAME REASON           a step that could not run: a failure, with the reason
#   record_result NAME RESULT TEXT   a result decided without a command (PASS, or a failure)
#   note TEXT                     a line for the summary (inside a step: the step's note file)
#   print_summary                 each step's result, seconds and notes; the build's share of
#                                 the total when a step is named "build"; PASS or FAIL
#   SELFTEST_STATUS               0 while every step passed, else 1

selftest_init() {
  SELFTEST_LOGS=$1
  SELFTEST_STARTED=$SECONDS
  SELFTEST_STATUS=0
  SELFTEST_STEPS=()
  declare -gA SELFTEST_RESULT=() SELFTEST_SECONDS=()
  mkdir -p "$SELFTEST_LOGS"
  export SELFTEST_LOGS
}

note() {
  echo "== $1"
  [[ -n "${SELFTEST_NOTES:-}" ]] && echo "$1" >>"$SELFTEST_NOTES"
  return 0
}

run_step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS rc=0
  export SELFTEST_NOTES=$SELFTEST_LOGS/$name.notes
  : >"$SELFTEST_NOTES"
  echo "---- $name (limit $limit s)"
  # -k: a step that ignores TERM is killed 10 s later; its own children go with it
  # (timeout signals the whole process group it started).
  timeout -k 10 "$limit" "$@" >"$SELFTEST_LOGS/$name.log" 2>&1 || rc=$?
  local took=$((SECONDS - start)) result
  case $rc in
    0) result=PASS ;;
    124 | 137) result="TIMEOUT after $limit s" ;;
    *) result="FAIL (exit $rc)" ;;
  esac
  SELFTEST_STEPS+=("$name")
  SELFTEST_RESULT[$name]=$result
  SELFTEST_SECONDS[$name]=$took
  sed 's/^/   /' "$SELFTEST_NOTES"
  if [[ $rc -ne 0 ]]; then
    SELFTEST_STATUS=1
    echo "   $result; the last lines of $SELFTEST_LOGS/$name.log:"
    tail -12 "$SELFTEST_LOGS/$name.log" | sed 's/^/   | /'
  fi
  unset SELFTEST_NOTES
  return 0
}

# record_result NAME RESULT TEXT: a result decided without running a command (RESULT PASS
# or a failure word); TEXT is its note.
record_result() {
  local name=$1 result=$2 text=$3
  SELFTEST_STEPS+=("$name")
  SELFTEST_RESULT[$name]=$result
  SELFTEST_SECONDS[$name]=0
  echo "$text" >"$SELFTEST_LOGS/$name.notes"
  [[ "$result" == PASS ]] || SELFTEST_STATUS=1
  echo "---- $name: $result: $text"
}

not_run() { record_result "$1" "NOT-RUN" "$2"; }

print_summary() {
  local total=$((SECONDS - SELFTEST_STARTED)) name
  echo
  echo "==== gpu_selftest summary ($total s; logs in $SELFTEST_LOGS)"
  for name in "${SELFTEST_STEPS[@]}"; do
    printf '  %-8s %-16s %4s s  %s\n' "$(cut -d' ' -f1 <<<"${SELFTEST_RESULT[$name]}")" "$name" \
      "${SELFTEST_SECONDS[$name]}" "$(cut -s -d' ' -f2- <<<"${SELFTEST_RESULT[$name]}")"
    [[ -s "$SELFTEST_LOGS/$name.notes" ]] && sed 's/^/               /' "$SELFTEST_LOGS/$name.notes"
  done
  if [[ -n "${SELFTEST_SECONDS[build]:-}" ]]; then
    echo "  build: ${SELFTEST_SECONDS[build]} s of $total s ($(awk -v b="${SELFTEST_SECONDS[build]}" -v t="$total" \
      'BEGIN { printf "%.0f", (t > 0 ? 100 * b / t : 0) }')%)"
  fi
  [[ $SELFTEST_STATUS -eq 0 ]] && echo "  RESULT: PASS" || echo "  RESULT: FAIL"
}
