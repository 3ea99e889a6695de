# shellcheck shell=bash
# Sourced (bash): the step runner of launch/gpu_selftest.sh. Each step is a command run under
# its own `timeout`; a step that fails or runs out of time is recorded and the next one runs
# all the same, so one run reports everything that is wrong. An overall deadline bounds the
# whole: no step starts after it, a step's limit never reaches past it, and the summary is
# printed whatever happens (a signal too). Tested on CPU by
# tests/integration/gpu_selftest_script.sh.
#
#   selftest_init LOGDIR [DEADLINE_S [OUTDIR]]
#                                 start the clock; logs and notes go under LOGDIR. No step
#                                 starts once DEADLINE_S (default 0: none) have passed. With
#                                 OUTDIR, the summary and the logs are also copied there
#                                 after every step (selftest_publish)
#   run_step NAME LIMIT CMD...    CMD (output in LOGDIR/NAME.log) under `timeout`, its limit
#                                 LIMIT or what is left before the deadline if that is less;
#                                 its notes (what `note` wrote while it ran) are printed after
#                                 it. A step the deadline leaves under 3 s for is NOT-RUN
#   not_run NAME REASON           a step that could not run: a failure, with the reason
#   record_result NAME RESULT TEXT   a result decided without a command (PASS, or a failure)
#   note TEXT                     a line for the summary (inside a step: the step's note file)
#   print_summary [TITLE]         each step's result, seconds and notes; the build's share of
#                                 the total when a step is named "build"; PASS or FAIL
#   selftest_interrupted SIGNAL   for a trap: ends the running step, records it, prints the
#                                 summary and publishes it
#   SELFTEST_STATUS               0 while every step passed, else 1

selftest_init() {
  SELFTEST_LOGS=$1
  SELFTEST_DEADLINE=${2:-0}
  SELFTEST_OUT=${3:-}
  SELFTEST_STARTED=$SECONDS
  SELFTEST_STATUS=0
  SELFTEST_STEPS=()
  SELFTEST_CURRENT="" SELFTEST_CURRENT_PID=""
  declare -gA SELFTEST_RESULT=() SELFTEST_SECONDS=()
  mkdir -p "$SELFTEST_LOGS"
  [[ -n "$SELFTEST_OUT" ]] && mkdir -p "$SELFTEST_OUT"
  export SELFTEST_LOGS
}

note() {
  echo "== $1"
  [[ -n "${SELFTEST_NOTES:-}" ]] && echo "$1" >>"$SELFTEST_NOTES"
  return 0
}

# Seconds before the deadline (a large number without one).
selftest_time_left() {
  if ((SELFTEST_DEADLINE > 0)); then
    echo $((SELFTEST_DEADLINE - (SECONDS - SELFTEST_STARTED)))
  else
    echo 1000000
  fi
}

run_step() {
  local name=$1 limit=$2
  shift 2
  local left
  left=$(selftest_time_left)
  # A step needs a few seconds to say anything: with less left, it is not started.
  if ((left < 3)); then
    not_run "$name" "not started: the self-test's deadline of $SELFTEST_DEADLINE s was reached after $((SECONDS - SELFTEST_STARTED)) s"
    return 0
  fi
  local cut=0
  if ((left < limit)); then limit=$left cut=1; fi
  local start=$SECONDS rc=0
  export SELFTEST_NOTES=$SELFTEST_LOGS/$name.notes
  : >"$SELFTEST_NOTES"
  echo "---- $name (limit $limit s$( ((cut)) && echo ", cut to the deadline"))"
  # -k: a step that ignores TERM is killed 5 s later; its own children go with it (timeout
  # signals the process group it started). In the background, so that a trapped signal
  # interrupts the wait at once (selftest_interrupted).
  timeout -k 5 "$limit" "$@" >"$SELFTEST_LOGS/$name.log" 2>&1 &
  SELFTEST_CURRENT=$name SELFTEST_CURRENT_PID=$! SELFTEST_CURRENT_START=$start
  wait "$SELFTEST_CURRENT_PID" || rc=$?
  SELFTEST_CURRENT="" SELFTEST_CURRENT_PID=""
  local took=$((SECONDS - start)) result
  case $rc in
    0) result=PASS ;;
    124 | 137) result="TIMEOUT after $limit s$( ((cut)) && echo " (the deadline)")" ;;
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
  selftest_publish
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
  echo "==== gpu_selftest summary${1:+ ($1)} ($total s; logs in $SELFTEST_LOGS)"
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

# The summary so far and every log, into SELFTEST_OUT (when set): three files, whatever the
# number of logs, so a machine that hands back only a few files returns all of it.
#   gpu_selftest_summary.txt   print_summary's output
#   gpu_selftest_logs.tar.gz   LOGDIR less data files (HDF5 checkpoints and datasets)
selftest_publish() {
  [[ -n "$SELFTEST_OUT" ]] || return 0
  print_summary "${1:-so far}" >"$SELFTEST_OUT/gpu_selftest_summary.txt" 2>&1
  tar -C "$SELFTEST_LOGS" --exclude='*.h5' --exclude='*.tar' -czf "$SELFTEST_OUT/gpu_selftest_logs.tar.gz" . 2>/dev/null || true
  return 0
}

selftest_interrupted() {
  local signal=$1
  if [[ -n "$SELFTEST_CURRENT_PID" ]]; then
    kill -TERM "$SELFTEST_CURRENT_PID" 2>/dev/null
    wait "$SELFTEST_CURRENT_PID" 2>/dev/null
    SELFTEST_STEPS+=("$SELFTEST_CURRENT")
    SELFTEST_RESULT[$SELFTEST_CURRENT]="INTERRUPTED by $signal"
    SELFTEST_SECONDS[$SELFTEST_CURRENT]=$((SECONDS - SELFTEST_CURRENT_START))
  fi
  SELFTEST_STATUS=1
  print_summary "interrupted by $signal"
  selftest_publish "interrupted by $signal"
}
