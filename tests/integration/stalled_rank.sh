#!/usr/bin/env bash
# A stopped rank (SIGSTOP) must not hang the job: at half the collective timeout the chief
# warns, naming the rank it waits for and its host; at the timeout every rank exits 5 with a
# message naming the stopped rank, and no process is left behind; with the flat and with
# the hierarchical all-reduce (whose collectives the watchdog watches too).
source "$(dirname "$0")/lib.sh"
require_data
for allreduce in flat hierarchical; do
out="$WORK/stalled-$allreduce-$$"
timeout_s=4
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 "$MIRRORED" train \
  --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --epochs 50 --model.hidden 32 \
  --batch_size 64 --threads 1 --collective_timeout_s "$timeout_s" --allreduce "$allreduce" \
  --out "$out" >"$WORK/log" 2>&1 &
job=$!
# Wait until training runs (the run directory exists), then stop rank 2.
wait_for_start "$out" "$job"
victim=$(rank_process "$out" 2)
[[ -n "$victim" ]] || { kill "$job"; cat "$WORK/log"; fail "rank 2 not found"; }
stopped_at=$SECONDS
kill -STOP "$victim"
status=0
timeout -k 5 60 tail --pid="$job" -f /dev/null || true
if kill -0 "$job" 2>/dev/null; then  # still running: the watchdog never fired
  kill -CONT "$victim"; pkill -9 -f -- "--out $out"; kill -9 "$job" 2>/dev/null
  tail -5 "$WORK/log"; fail "the job still ran 60 s after rank 2 was stopped"
fi
wait "$job" || status=$?
took=$((SECONDS - stopped_at))
kill -CONT "$victim" 2>/dev/null || true
grep -a -E "collective warning|collective timeout|error" "$WORK/log" | head -5
((status != 0)) || fail "the job exited 0 after a rank was stopped"
grep -a -q "collective timeout" "$WORK/log" || fail "no collective-timeout message"
grep -a -q "collective timeout.*rank 2 on [^ ]* (silent" "$WORK/log" ||
  fail "the timeout message does not name the stopped rank 2 and its host"
((status == 5)) || fail "the job exited $status, expected 5 (collective timeout)"
# The warning stage: before the abort, the chief names whom it waits for.
warning_line=$(grep -a -n "collective warning" "$WORK/log" | head -1 | cut -d: -f1)
abort_line=$(grep -a -n "collective timeout" "$WORK/log" | head -1 | cut -d: -f1)
[[ -n "$warning_line" ]] || { cat "$WORK/log"; fail "no collective warning before the abort"; }
((warning_line < abort_line)) || fail "the warning (line $warning_line) came after the abort (line $abort_line)"
grep -a "collective warning" "$WORK/log" | head -1 | grep -a -q "rank 2 on " ||
  fail "the warning does not name rank 2 and its host: $(grep -a "collective warning" "$WORK/log" | head -1)"
((took <= timeout_s + 15)) || fail "the job took $took s to end after the stop (timeout $timeout_s s)"
no_leftovers "$out"
echo "ok ($allreduce): stopped rank 2 named; job ended ${took} s after SIGSTOP with exit $status; nothing left behind"
done
