#!/usr/bin/env bash
# Verdicts, not logs (the flight recorder, comm/health/flight_recorder.h):
# 1. SIGUSR2 on a running job: the rank writes trace/rank-<r>.jsonl and keeps training.
# 2. A rank stopped with SIGSTOP: exit 5 at the timeout, dumps from the reachable ranks, and
#    `mirrored trace` names the stopped rank and the collective it did not join, first line.
# 3. A deliberately mismatched collective order: train_with_extra_barrier (tests/tools/) trains
#    as `mirrored train` does, and its rank 1 issues one barrier more at the end of step 4
#    while rank 0 goes on to the log point's loss all-reduce. The timeout message and
#    `mirrored trace` both name rank 1 and both operations.
# 4. (ULFM builds) the mismatch with on_failure = shrink: the watchdog revokes rather than
#    aborts, every rank is still alive after the shrink, and the job ends with exit 5.
source "$(dirname "$0")/lib.sh"
: "${TRAIN_WITH_EXTRA_BARRIER:?TRAIN_WITH_EXTRA_BARRIER must point at the train_with_extra_barrier tool}"
require_data
timeout_s=3
base=(train --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --model.hidden 32 --batch_size 48
      --threads 1 --collective_timeout_s "$timeout_s")

# --- 1 and 2: a signal dump, then a stopped rank -------------------------------------------
out="$WORK/stopped"
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 3 "$MIRRORED" "${base[@]}" --epochs 50 \
  --log_every 5 --out "$out" >"$WORK/stopped.log" 2>&1 &
job=$!
wait_for_start "$out" "$job"
victim=$(rank_process "$out" 2)
signalled=$(rank_process "$out" 1)
[[ -n "$victim" && -n "$signalled" ]] || { kill "$job"; cat "$WORK/stopped.log"; fail "ranks 1 and 2 not found"; }
kill -USR2 "$signalled"
signal_dumped() { [[ -s "$out/trace/rank-1.jsonl" ]]; }
wait_until 10 "trace/rank-1.jsonl, the dump SIGUSR2 asks for" signal_dumped
head -1 "$out/trace/rank-1.jsonl" | grep -q '"reason": "signal"' || fail "the signal dump's header: $(head -1 "$out/trace/rank-1.jsonl")"
kill -0 "$job" 2>/dev/null || fail "the job ended after SIGUSR2 (it must keep training)"
rm -f "$out/trace/rank-1.jsonl"
kill -STOP "$victim"
stopped_at=$SECONDS
status=0
timeout -k 5 60 tail --pid="$job" -f /dev/null || true
if kill -0 "$job" 2>/dev/null; then
  kill -CONT "$victim"; kill -9 "$job"; fail "the job still ran 60 s after rank 2 was stopped"
fi
wait "$job" || status=$?
took=$((SECONDS - stopped_at))
kill -CONT "$victim" 2>/dev/null || true
((status == 5)) || { tail -20 "$WORK/stopped.log"; fail "the job exited $status after SIGSTOP, expected 5"; }
((took <= timeout_s + 15)) || fail "the job took $took s to end after the stop (timeout $timeout_s s)"
[[ -s "$out/trace/rank-0.jsonl" && -s "$out/trace/rank-1.jsonl" ]] ||
  { ls -l "$out/trace" || true; tail -20 "$WORK/stopped.log"; fail "no dumps from the reachable ranks 0 and 1"; }
# The stopped rank writes nothing while stopped; Open MPI may wake it (SIGCONT) on its way to
# killing it, and then it may write what it saw, which is fine: it had not joined either.
"$MIRRORED" trace "$out" >"$WORK/stopped.trace" || fail "mirrored trace exited $?"
cat "$WORK/stopped.trace"
# Stopped before the collective (it did not join) or inside it (it went silent there).
head -1 "$WORK/stopped.trace" |
  grep -qE "^rank 2 (did not join|stopped responding inside) collective #[0-9]+ on [a-z]+: [a-z-]+ of [0-9]+ " ||
  fail "the verdict does not name rank 2 and the collective: $(head -1 "$WORK/stopped.trace")"
grep -qE "^  rank 2( on [^ ]+)?: " "$WORK/stopped.trace" || fail "the trace has no line for rank 2"

# --- 3: a mismatched collective order -------------------------------------------------------
out="$WORK/mismatch"
status=0
timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  "$TRAIN_WITH_EXTRA_BARRIER" 1 4 "${base[@]:1}" --epochs 1 --max_steps 20 --log_every 2 \
  --out "$out" >"$WORK/mismatch.log" 2>&1 || status=$?
((status == 5)) || { tail -20 "$WORK/mismatch.log"; fail "the mismatched run exited $status, expected 5"; }
grep -a "collective timeout" "$WORK/mismatch.log" |
  grep -qE "rank 1 on [^ ]+ runs barrier #[0-9]+ on world .* where rank 0 on [^ ]+ runs allreduce #[0-9]+ on world" ||
  { grep -a "collective timeout" "$WORK/mismatch.log"; fail "the timeout message does not name rank 1's barrier and rank 0's allreduce"; }
"$MIRRORED" trace "$out" >"$WORK/mismatch.trace" || fail "mirrored trace exited $?"
cat "$WORK/mismatch.trace"
head -1 "$WORK/mismatch.trace" |
  grep -qE "^mismatch at collective #[0-9]+ on world: rank 0 ran allreduce of 1 double .*; rank 1 ran barrier" ||
  fail "the trace verdict does not name both operations: $(head -1 "$WORK/mismatch.trace")"

# --- 4: the same mismatch with on_failure = shrink (a ULFM build) ----------------------------
# The watchdog revokes instead of aborting; the shrink finds every rank alive, and the job
# still ends (exit 5) saying why, instead of going on into the same timeout again.
if grep -q "^  ulfm  *available (" <<<"$("$MIRRORED" info 2>/dev/null)"; then
  status=0
  timeout -k 5 60 mpirun --with-ft ulfm --allow-run-as-root --oversubscribe --bind-to none -np 2 \
    "$TRAIN_WITH_EXTRA_BARRIER" 1 4 "${base[@]:1}" --epochs 1 --max_steps 20 --log_every 2 --on_failure shrink \
    --out "$WORK/mismatch_shrink" >"$WORK/mismatch_shrink.log" 2>&1 || status=$?
  # shellcheck disable=SC2015  # fail when either is false
  ((status == 5)) && grep -aq "a collective timed out, but no rank was lost: every rank is alive" "$WORK/mismatch_shrink.log" ||
    { tail -20 "$WORK/mismatch_shrink.log"; fail "on_failure = shrink, mismatched collectives: exit $status, expected 5 saying no rank was lost"; }
  echo "ok: with on_failure = shrink the mismatch still ends the job (exit 5): no rank was lost"
else
  echo "skipped part 4 (on_failure = shrink): this binary has no ULFM"
fi
echo "PASS: a stopped rank and a mismatched collective are named by the watchdog and by mirrored trace"
