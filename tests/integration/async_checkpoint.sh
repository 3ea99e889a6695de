#!/usr/bin/env bash
# Checkpoints written on a background thread (checkpoint.async, checkpoint_writer.h):
#  1. the files are those the synchronous writer makes at the same steps, dataset for
#     dataset and bit for bit, replicated and with the optimizer state sharded (ZeRO-1);
#  2. the chief killed while a background write is in flight (its temporary exists) leaves
#     the previous checkpoint, and the run resumed from it ends bit-identical to an
#     uninterrupted run;
#  3. preemption (SIGTERM as preemption_signal) arriving while a write is in flight ends
#     with exit 7 and a complete checkpoint of the step it stopped at.
# The model is wide (hidden 2048: 13 MB files), and checkpoints come every other step, so that a write lasts long enough to be
# caught in flight; the ranks are stopped (SIGSTOP) the moment its temporary appears.
source "$(dirname "$0")/lib.sh"
require_data
start=$SECONDS
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 2
        --model.hidden 2048 --lr 0.05 --momentum 0.9 --seed 5 --threads 1 --log_every 2
        --checkpoint.every_steps 2 --checkpoint.keep 100)

# same_checkpoint A B: every dataset and every root attribute equal, but the config text's
# checkpoint.async line (and the checksum over that text).
same_checkpoint() {
  local group attribute
  for group in params optimizer buffers; do
    h5dump -H -g "/$group" "$1" >/dev/null 2>&1 || continue
    h5diff "$1" "$2" "/$group" "/$group" || fail "/$group of $1 and $2 differ"
  done
  for attribute in $(h5dump -H "$1" | sed -nE 's/^   ATTRIBUTE "([a-z_0-9]+)".*/\1/p'); do
    [[ $attribute == config || $attribute == crc32 ]] && continue
    diff <(h5dump -a "/$attribute" "$1" | tail -n +2) <(h5dump -a "/$attribute" "$2" | tail -n +2) >/dev/null ||
      fail "attribute $attribute of $1 and $2 differs"
  done
  diff <(h5dump -a /config "$1" | grep -vE "async|STRSIZE" | tail -n +2) <(h5dump -a /config "$2" | grep -vE "async|STRSIZE" | tail -n +2) \
    >/dev/null || fail "the config of $1 and $2 differs beyond checkpoint.async"
}

# 1. Same files, replicated and sharded optimizer state, two ranks.
for shard in false true; do
  for async in false true; do
    mkdir -p "$WORK/$shard/$async"
    (cd "$WORK/$shard/$async" && mpirun_np 2 train "${common[@]}" --max_steps 12 --optimizer.shard "$shard" \
       --checkpoint.async "$async" --out run --quiet >log 2>&1) || { cat "$WORK/$shard/$async/log"; fail "run"; }
  done
  files=$(ls "$WORK/$shard/false/run/checkpoints")
  [[ "$files" == "$(ls "$WORK/$shard/true/run/checkpoints")" && $(wc -w <<<"$files") -eq 6 ]] ||
    fail "optimizer.shard = $shard: different checkpoint files: $(ls "$WORK/$shard"/*/run/checkpoints)"
  for file in $files; do
    same_checkpoint "$WORK/$shard/false/run/checkpoints/$file" "$WORK/$shard/true/run/checkpoints/$file"
  done
  echo "ok: optimizer.shard = $shard: 6 background checkpoints equal the synchronous ones bit for bit"
done

# wait_for_write_in_flight DIR LAUNCHER: returns once DIR holds a finished checkpoint and
# the temporary of the next one (a write in flight) while every rank of LAUNCHER is stopped; prints the ranks' pids. A write
# that ends between the sighting and the stop is let go, and the next one is tried.
wait_for_write_in_flight() {
  local dir=$1 launcher=$2 ranks
  for _ in $(seq 1 200); do
    for _ in $(seq 1 200000); do
      compgen -G "$dir/ckpt-*.h5.tmp.*" >/dev/null && compgen -G "$dir/ckpt-*.h5" >/dev/null && break
      kill -0 "$launcher" 2>/dev/null || fail "the run ended before a write was seen in flight"
    done
    ranks=($(pgrep -P "$launcher" || true))
    kill -STOP "${ranks[@]}"
    if compgen -G "$dir/ckpt-*.h5.tmp.*" >/dev/null; then
      echo "${ranks[@]}"
      return
    fi
    kill -CONT "${ranks[@]}"
  done
  fail "no write seen in flight"
}
newest() { ls "$1" | { grep -E '^ckpt-[0-9]+\.h5$' || true; } | tail -1; }

mpirun_np 2 train "${common[@]}" --max_steps 100 --out "$WORK/uninterrupted" --quiet >/dev/null

# 2. The chief killed mid-write.
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train "${common[@]}" --max_steps 100 \
  --out "$WORK/killed" >"$WORK/killed.log" 2>&1 &
launcher=$!
ranks=($(wait_for_write_in_flight "$WORK/killed/checkpoints" "$launcher"))
in_flight=$(compgen -G "$WORK/killed/checkpoints/ckpt-*.h5.tmp.*" | head -1)
previous=$(newest "$WORK/killed/checkpoints")
[[ -n "$previous" ]] || fail "no checkpoint before the one in flight"
chief=$(rank_pid "$WORK/killed" 0)
kill -9 "$chief"
kill -CONT "${ranks[@]}"
wait "$launcher" && fail "the job survived its chief's death"
[[ "$(newest "$WORK/killed/checkpoints")" == "$previous" ]] ||
  fail "the killed write ($in_flight) replaced the previous checkpoint $previous"
mpirun_np 2 train "${common[@]}" --max_steps 100 --out "$WORK/killed" >"$WORK/resumed.log" 2>&1 ||
  { cat "$WORK/resumed.log"; fail "resume after the kill"; }
grep -q "resuming from '$WORK/killed/checkpoints/$previous'" "$WORK/resumed.log" ||
  { cat "$WORK/resumed.log"; fail "did not resume from $previous"; }
"$COMPARE" "$WORK/uninterrupted/final.h5" "$WORK/killed/final.h5" --exact
compgen -G "$WORK/killed/checkpoints/*.tmp.*" >/dev/null && fail "the abandoned temporary was left behind"
echo "ok: killed during the write of $(basename "${in_flight%%.tmp.*}"): $previous kept, resumed bit-identically"

# 3. Preemption during a write: every step a checkpoint, so one is always in flight.
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train "${common[@]}" --max_steps 100 \
  --checkpoint.every_steps 1 --log_every 1 --preemption_signal TERM --out "$WORK/preempted" >"$WORK/preempted.log" 2>&1 &
launcher=$!
ranks=($(wait_for_write_in_flight "$WORK/preempted/checkpoints" "$launcher"))
kill -TERM "${ranks[@]}"
kill -CONT "${ranks[@]}"
status=0
timeout 120 tail --pid="$launcher" -f /dev/null || fail "the preempted job did not end"
wait "$launcher" || status=$?
((status == 7)) || { cat "$WORK/preempted.log"; fail "expected exit 7 (preempted), got $status"; }
step=$(sed -nE 's/.*checkpoint of step ([0-9]+) written.*/\1/p' "$WORK/preempted.log")
file=$(printf 'ckpt-%09d.h5' "$step")
[[ "$(newest "$WORK/preempted/checkpoints")" == "$file" ]] || fail "the newest checkpoint is not $file"
compgen -G "$WORK/preempted/checkpoints/*.tmp.*" >/dev/null && fail "a write was left unfinished"
mpirun_np 2 train "${common[@]}" --max_steps 100 --checkpoint.every_steps 1 --log_every 1 --preemption_signal TERM \
  --out "$WORK/preempted" >"$WORK/preempted-resumed.log" 2>&1 || { cat "$WORK/preempted-resumed.log"; fail "resume"; }
grep -q "resuming from '$WORK/preempted/checkpoints/$file'" "$WORK/preempted-resumed.log" ||
  { cat "$WORK/preempted-resumed.log"; fail "did not resume from $file"; }
"$COMPARE" "$WORK/uninterrupted/final.h5" "$WORK/preempted/final.h5" --exact
echo "ok: SIGTERM during a write: exit 7 with a whole $file, resumed bit-identically"
echo "async_checkpoint: ok in $((SECONDS - start)) s"
