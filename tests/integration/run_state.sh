#!/usr/bin/env bash
# The run-state directory (MIRRORED_RUN_STATE_DIR: the chief's exit status, the relayed
# signals, the output copy; src/core/run_state.h, launch/mpi_env.sh):
#   1. launch/local.sh makes a private one (mode 0700) per run and removes it at the end;
#   2. one named in MIRRORED_RUN_STATE_DIR that is a symlink, of mode 0755, or another
#      user's is refused by the script (exit 2, saying why) and by mirrored itself (a
#      warning; nothing is written through it); the retired MIRRORED_EXIT_STATUS_FILE is
#      refused with the name of its replacement;
#   3. the chief's exit status reaches the script: a job that stops with 7 exits 7.
source "$(dirname "$0")/lib.sh"
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"

# 1. A run's own directory.
"$SOURCE_DIR/launch/local.sh" 1 bash -c 'true' >/dev/null  # another program: no directory at all
"$SOURCE_DIR/launch/local.sh" 1 "$MIRRORED" --version >"$WORK/version.out" 2>&1 ||
  { cat "$WORK/version.out"; fail "launch/local.sh 1 mirrored --version failed"; }
left=$(find "$TMPDIR" -mindepth 1 | head -3)
[[ -z "$left" ]] || fail "the run-state directory was left behind: $left"
echo "ok: launch/local.sh makes a run-state directory per run and removes it"

# 2. Refused directories.
refused() {  # refused NAME TEXT: launch/local.sh with MIRRORED_RUN_STATE_DIR=$WORK/NAME exits 2 naming TEXT
  local status=0
  MIRRORED_RUN_STATE_DIR=$WORK/$1 "$SOURCE_DIR/launch/local.sh" 1 "$MIRRORED" --version >"$WORK/$1.out" 2>&1 || status=$?
  ((status == 2)) || { cat "$WORK/$1.out"; fail "$1: exit $status, expected 2"; }
  grep -qF -- "$2" "$WORK/$1.out" || { cat "$WORK/$1.out"; fail "$1: the refusal lacks '$2'"; }
  echo "ok: $1 refused: $(grep -F -- "$2" "$WORK/$1.out" | head -1)"
}
mkdir -m 700 "$WORK/real"
ln -s "$WORK/real" "$WORK/symlink"
refused symlink "MIRRORED_RUN_STATE_DIR '$WORK/symlink': a symlink; refused"
mkdir -m 755 "$WORK/open"
refused open "mode 755, expected 700"
if [[ $(id -u) -eq 0 ]]; then
  mkdir -m 700 "$WORK/foreign"
  chown 65534:65534 "$WORK/foreign"
  refused foreign "owned by uid 65534, not by you"
fi
status=0
MIRRORED_EXIT_STATUS_FILE=$WORK/status "$SOURCE_DIR/launch/local.sh" 1 "$MIRRORED" --version >"$WORK/old.out" 2>&1 ||
  status=$?
((status == 2)) && grep -q "MIRRORED_EXIT_STATUS_FILE is no longer read; set MIRRORED_RUN_STATE_DIR" "$WORK/old.out" ||
  { cat "$WORK/old.out"; fail "MIRRORED_EXIT_STATUS_FILE: exit $status"; }
# mirrored alone refuses them too, and writes nothing through the symlink.
MIRRORED_RUN_STATE_DIR=$WORK/symlink "$MIRRORED" --version >"$WORK/direct.out" 2>&1
grep -q "MIRRORED_RUN_STATE_DIR '$WORK/symlink': a symlink or not a directory: not used" "$WORK/direct.out" ||
  { cat "$WORK/direct.out"; fail "mirrored used a symlinked run-state directory"; }
[[ -z "$(ls -A "$WORK/real")" ]] || fail "mirrored wrote through the symlink: $(ls -A "$WORK/real")"
echo "ok: mirrored itself refuses a symlinked run-state directory and writes nothing through it"

# 3. The chief's status reaches the script (here 7: a preemption warning before step 1).
require_data
status=0
"$SOURCE_DIR/launch/local.sh" 2 "$MIRRORED" train --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" \
  --model.hidden 16 --batch_size 64 --epochs 1 --max_steps 100000 --threads 1 --out "$WORK/run" --progress plain \
  --log_every 1 >"$WORK/run.out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q '"step": 2,' "$WORK/run/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
kill -USR1 "$job"
wait "$job" || status=$?
((status == 7)) || { cat "$WORK/run.out"; fail "the preempted job exited $status, expected 7"; }
[[ -z "$(find "$TMPDIR" -mindepth 1 | head -1)" ]] || fail "the run-state directory was left behind"
echo "ok: the chief's exit status (7) reached launch/local.sh through the run-state directory"
echo "run_state: ok"
