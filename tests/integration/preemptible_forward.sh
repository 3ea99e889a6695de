#!/usr/bin/env bash
# slurm/preemptible.sh forwards the signal the trainer listens for (preemption_signal), not
# always SIGUSR1: read from --preemption_signal on the command line, or from the --config
# file. Here it runs mpirun (the launcher of train.sbatch's fallback) with 2 ranks; the
# batch shell's signal is sent to the script, as Slurm's --signal=B:... does. Without
# SLURM_JOB_ID the script exits 0 after the trainer's checkpoint-and-stop (exit 7).
source "$(dirname "$0")/lib.sh"
require_data
unset SLURM_JOB_ID
script=${SOURCE_DIR:?}/slurm/preemptible.sh
# 30 epochs (4680 steps), of which a run stopped by the signal does a few hundred: on a fast
# CPU 3 epochs were over before the signal had passed through the script and mpirun.
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 30
        --model.hidden 32 --seed 4 --threads 1 --log_every 10)
launcher=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train)

# preempt NAME SIGNAL ARGS...: the job through the script, SIGNAL sent to the script once
# training has started; it must checkpoint on that signal and end with exit 0.
preempt() {
  local name=$1 signal=$2; shift 2
  "$script" "${launcher[@]}" "${common[@]}" --out "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 400); do [[ -s "$WORK/$name/metrics.jsonl" ]] && break; sleep 0.05; done
  [[ -s "$WORK/$name/metrics.jsonl" ]] || { kill "$pid"; cat "$WORK/$name.log"; fail "$name: training did not start"; }
  kill -s "$signal" "$pid"
  local status=0
  timeout 120 tail --pid="$pid" -f /dev/null || fail "$name: the signalled job did not end"
  wait "$pid" || status=$?
  ((status == 0)) || { cat "$WORK/$name.log"; fail "$name: preemptible.sh exited $status, expected 0"; }
  grep -q "preemptible.sh: SIG$signal (time limit or preemption ahead)" "$WORK/$name.log" ||
    { cat "$WORK/$name.log"; fail "$name: SIG$signal was not forwarded"; }
  grep -q "SIG$signal (preemption warning): checkpoint of step" "$WORK/$name.log" ||
    { cat "$WORK/$name.log"; fail "$name: the trainer did not checkpoint on SIG$signal"; }
  [[ ! -e "$WORK/$name/final.h5" ]] || fail "$name: the run was not stopped early"
  echo "ok: $name: $(grep -o "SIG$signal (preemption warning): checkpoint of step [0-9]*" "$WORK/$name.log")"
}

preempt flag USR2 --preemption_signal USR2
printf 'preemption_signal = USR2\n[model]\nhidden = 32\n' >"$WORK/usr2.ini"
preempt config USR2 --config "$WORK/usr2.ini"

# A name the trainer does not know stops the script before anything is launched.
status=0
"$script" "${launcher[@]}" --preemption_signal HUP >"$WORK/bad.log" 2>&1 || status=$?
((status == 2)) && grep -q "preemption_signal 'HUP': expected USR1, USR2, TERM or none" "$WORK/bad.log" ||
  { cat "$WORK/bad.log"; fail "an unknown preemption_signal was not refused (exit $status)"; }
echo "ok: an unknown preemption_signal is refused before launching"
