#!/usr/bin/env bash
# Ctrl-C on a terminal (tests/integration/pty_run.py types it: SIGINT to the foreground
# process group, as in a shell):
#   1. `mirrored train`: the first Ctrl-C says at once what will happen, a checkpoint of the
#      step is written, the run stops saying where it can resume, exit 130; the same command
#      then resumes from that checkpoint and finishes;
#   2. a second Ctrl-C while the first is being honoured stops at once (exit 130), naming the
#      checkpoint directory, and writes nothing more;
#   3. launch/local.sh 2: the first Ctrl-C asks every rank for a checkpoint (the preemption
#      signal, which mpirun passes on: it cannot pass SIGINT), exit 130 with a checkpoint.
source "$(dirname "$0")/lib.sh"
"$MIRRORED" data import-text --out "$WORK/corpus" "${DOCS_TEXT[@]}" >/dev/null
PTY=(python3 "$SOURCE_DIR/tests/integration/pty_run.py")
run=(train --model gpt --gpt.layers 2 --gpt.heads 2 --gpt.width 64 --gpt.context 16 --batch_size 4 --threads 1
     --device cpu --data.train "$WORK/corpus/train.h5" --data.test "$WORK/corpus/val.h5" --progress plain
     --log_every 10 --checkpoint.every_steps 100000 --eval_windows 8)

# 1. Once.
status=0
"${PTY[@]}" --ctrl-c-after 'step 20/' "$WORK/once.tty" 120 "$MIRRORED" "${run[@]}" --max_steps 3000 --out "$WORK/once" \
  2>"$WORK/once.err" || status=$?
text=$(tr '\r' '\n' <"$WORK/once.tty")
((status == 130)) || { echo "$text"; fail "first Ctrl-C: exit $status, expected 130"; }
grep -q "mirrored: interrupted (Ctrl-C): writing a checkpoint at the end of this step, then stopping; press Ctrl-C again to stop at once" <<<"$text" ||
  { echo "$text"; fail "first Ctrl-C: no immediate word of what will happen"; }
step=$(sed -nE 's/.*interrupted \(SIGINT, Ctrl-C\): checkpoint of step ([0-9]+) written to .*; run the same command again to resume from it \(exit 130\).*/\1/p' <<<"$text")
[[ -n "$step" && -s "$WORK/once/checkpoints/$(printf 'ckpt-%09d.h5' "$step")" && ! -e "$WORK/once/final.h5" ]] ||
  { echo "$text"; fail "first Ctrl-C: no checkpoint named (or a final.h5 written)"; }
((step >= 20 && step < 3000)) || fail "first Ctrl-C: checkpoint of step $step"
echo "ok: the first Ctrl-C wrote the checkpoint of step $step and stopped with 130 ($(cat "$WORK/once.err"))"
"$MIRRORED" "${run[@]}" --max_steps 3000 --out "$WORK/once" >"$WORK/resume.out" 2>&1 ||
  { cat "$WORK/resume.out"; fail "the same command did not resume"; }
grep -q "resuming from .*ckpt-0*$step.h5" "$WORK/resume.out" && [[ -s "$WORK/once/final.h5" ]] ||
  { cat "$WORK/resume.out"; fail "the same command did not resume from step $step and finish"; }
echo "ok: the same command resumed from step $step and finished"

# 2. Twice: a model whose step takes long enough for the second Ctrl-C to come within it.
status=0
"${PTY[@]}" --ctrl-c-after 'step 20/' --ctrl-c-after 'again to stop at once' "$WORK/twice.tty" 120 "$MIRRORED" "${run[@]}" \
  --gpt.width 512 --gpt.layers 4 --gpt.heads 4 --max_steps 100000 --out "$WORK/twice" 2>"$WORK/twice.err" || status=$?
text=$(tr '\r' '\n' <"$WORK/twice.tty")
((status == 130)) || { echo "$text"; fail "second Ctrl-C: exit $status, expected 130"; }
grep -q "mirrored: interrupted again (Ctrl-C): stopping at once; the run resumes from the newest checkpoint in $WORK/twice/checkpoints" <<<"$text" ||
  { echo "$text"; fail "second Ctrl-C: no word of where the run resumes"; }
! grep -q "checkpoint of step" <<<"$text" && [[ -z "$(ls -A "$WORK/twice/checkpoints" 2>/dev/null)" ]] ||
  { echo "$text"; ls -la "$WORK/twice/checkpoints"; fail "second Ctrl-C: a checkpoint was still written"; }
echo "ok: a second Ctrl-C stopped at once with 130, naming the checkpoint directory ($(cat "$WORK/twice.err"))"

# 3. The launch script.
status=0
"${PTY[@]}" --ctrl-c-after 'step 20/' "$WORK/local.tty" 120 "$SOURCE_DIR/launch/local.sh" 2 "$MIRRORED" "${run[@]}" \
  --max_steps 100000 --out "$WORK/local" 2>"$WORK/local.err" || status=$?
text=$(tr '\r' '\n' <"$WORK/local.tty")
((status == 130)) || { echo "$text"; fail "launch/local.sh: exit $status, expected 130"; }
grep -q "interrupted (Ctrl-C): asking mirrored to write a checkpoint at the end of this step and stop (SIGUSR1" <<<"$text" &&
  grep -q "interrupted (Ctrl-C): mirrored wrote a checkpoint and stopped; run the same command again to resume" <<<"$text" ||
  { echo "$text"; fail "launch/local.sh: the Ctrl-C lines are missing"; }
step=$(sed -nE 's/.*SIGUSR1 \(preemption warning\): checkpoint of step ([0-9]+) written.*/\1/p' <<<"$text")
[[ -n "$step" && -s "$WORK/local/checkpoints/$(printf 'ckpt-%09d.h5' "$step")" ]] ||
  { echo "$text"; fail "launch/local.sh: no checkpoint"; }
echo "ok: launch/local.sh 2: Ctrl-C wrote the checkpoint of step $step on both ranks' agreement, exit 130 ($(cat "$WORK/local.err"))"
echo "ctrl_c: ok"
