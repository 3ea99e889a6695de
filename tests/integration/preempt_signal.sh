#!/usr/bin/env bash
# Preemption without Slurm: SIGUSR1 reaches ONE rank of two mid-run; both must stop at the
# same step, the chief writes that step's checkpoint, and the job exits 7 without final.h5.
# Run again (resume = auto), it finishes bit-identical to an uninterrupted run.
source "$(dirname "$0")/lib.sh"
require_data
start=$SECONDS
# The test set as training data: 156 steps per epoch of 64, 624 steps in all: a second or
# two per epoch on some machines, a fraction of a second for the whole run on others.
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 4
        --model.hidden 32 --lr 0.05 --momentum 0.9 --seed 4 --threads 1 --log_every 10)
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train "${common[@]}" \
  --out "$WORK/run" >"$WORK/first.log" 2>&1 &
launcher=$!
for _ in $(seq 1 3000); do [[ -s "$WORK/run/metrics.jsonl" ]] && break; sleep 0.005; done
ranks=($(pgrep -P "$launcher" || true))
((${#ranks[@]} == 2)) || { kill "$launcher"; fail "expected 2 rank processes under mpirun, found ${ranks[*]:-none}"; }
# Both ranks held still while one is signalled: on a fast CPU the run would otherwise end
# before the signal lands (it did, at 10k steps/s). The signal waits for SIGCONT.
kill -STOP "${ranks[@]}"
kill -USR1 "${ranks[1]}"
kill -CONT "${ranks[@]}"
status=0
timeout 120 tail --pid="$launcher" -f /dev/null || fail "the signalled job did not end"
wait "$launcher" || status=$?
((status == 7)) || { cat "$WORK/first.log"; fail "expected exit 7 (preempted), got $status"; }
grep -q "SIGUSR1 (preemption warning): checkpoint of step" "$WORK/first.log" ||
  { cat "$WORK/first.log"; fail "no preemption message"; }
[[ ! -e "$WORK/run/final.h5" ]] || fail "a preempted run must not write final.h5"
step=$(sed -nE 's/.*checkpoint of step ([0-9]+) written.*/\1/p' "$WORK/first.log")
[[ -s "$WORK/run/checkpoints/$(printf 'ckpt-%09d.h5' "$step")" ]] || fail "no checkpoint of step $step"
((step < 624)) || fail "the signal came after the run ended (step $step): nothing was tested"
echo "ok: stopped at step $step with exit 7 ($((SECONDS - start)) s)"

mpi_run() { mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" "$@"; }
mpi_run train "${common[@]}" --out "$WORK/run" >"$WORK/resumed.log" 2>&1 || { cat "$WORK/resumed.log"; fail "resume failed"; }
grep -q "resuming from .*ckpt-0*$step.h5" "$WORK/resumed.log" || { cat "$WORK/resumed.log"; fail "did not resume from step $step"; }
mpi_run train "${common[@]}" --out "$WORK/uninterrupted" --quiet >/dev/null
"$COMPARE" "$WORK/uninterrupted/final.h5" "$WORK/run/final.h5" --exact
echo "preempt_signal: ok in $((SECONDS - start)) s"
