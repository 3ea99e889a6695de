#!/usr/bin/env bash
# Growing back through launch/local.sh: 4 ranks, sgd mlp, reduction = invariant,
# on_failure = shrink.
#   1. `mirrored resize RUN_DIR` on the job at its full size: ignored, with a message;
#   2. kill -9 of a worker: the job goes on with 3 replicas (a membership record);
#   3. `mirrored resize RUN_DIR`: the job writes a checkpoint and exits 11, local.sh relaunches
#      it with 4 ranks, it resumes from that checkpoint and finishes with exit 0, final.h5
#      bit-identical to the uninterrupted 4-rank run's; metrics.jsonl holds the resize record
#      and a membership record with "grown" (3 -> 4, the downtime, trigger "command"), which
#      `mirrored info --ranks` shows; nothing is left running.
# Steps of this mlp take 3-10 ms, and a `mirrored resize` is seen 0.5-3 s after it is asked
# (a process start on 2 cores that 8 ranks keep busy, then the chief's 0.1 s poll): 2,000 steps
# leave room for two of them and a recovery (400 left too little on a loaded 2-core machine).
source "$(dirname "$0")/lib.sh"
require_data
require_ulfm
start=$SECONDS
common=("${FMNIST_MLP_ARGS[@]}" --batch_size 128 --epochs 5 --max_steps 2000 --reduction invariant --on_failure shrink)
local_run() {  # local_run OUT: launch/local.sh 4 ranks writing OUT, with a time limit
  timeout -k 5 120 "$SOURCE_DIR/launch/local.sh" 4 "$MIRRORED" train "${common[@]}" --out "$1"
}

# The uninterrupted run beside the one that grows (most of a launch is waiting: the test
# takes half the time).
local_run "$WORK/full" >"$WORK/full.log" 2>&1 &
full=$!

out="$WORK/grown"
local_run "$out" >"$out.log" 2>&1 &
job=$!
wait_for_step "$out" 5 "$job"
"$MIRRORED" resize "$out" >"$WORK/resize_full.out" 2>&1 || { cat "$WORK/resize_full.out"; fail "mirrored resize (full size)"; }
wait_for "$out.log" 'resize requested \(command\): ignored, the job runs at its full size \(4 replica' \
  "resize at full size" 30
echo "ok: resize at full size ignored: $(grep -o 'resize requested (command): ignored[^;]*' "$out.log")"
signal_rank "$out" 2 9 >/dev/null
wait_for "$out/metrics.jsonl" '"kind": "membership", .*"world_size": 3, "lost": \[\{"rank": 2,' "the shrink" 30
"$MIRRORED" resize "$out" >"$WORK/resize.out" 2>&1 || { cat "$WORK/resize.out"; fail "mirrored resize"; }
status=0
wait "$job" || status=$?
((status == 0)) || { cat "$out.log"; fail "the grown job exited $status"; }
wait "$full" || { cat "$WORK/full.log"; fail "uninterrupted run"; }
grep -q "resize requested (command): the job runs on 3 of its 4 replica(s)" "$out.log" || { cat "$out.log"; fail "no resize line"; }
grep -q "exit 11): relaunching it at its configured size" "$out.log" || { cat "$out.log"; fail "local.sh did not relaunch"; }
"$COMPARE" "$WORK/full/final.h5" "$out/final.h5" --exact ||
  fail "4 -> 3 -> 4 ranks (reduction = invariant): final.h5 is not bit-identical to the uninterrupted run's"
resize=$(grep '"kind": "resize"' "$out/metrics.jsonl") || fail "no resize record"
grep -q '"world_size": 3, "trigger": "command", "time_ms": ' <<<"$resize" || fail "resize record: $resize"
step=$(sed -E 's/.*"step": ([0-9]+),.*/\1/' <<<"$resize")
grep -q "resuming from '$out/checkpoints/$(printf 'ckpt-%09d.h5' "$step")'" "$out.log" || { cat "$out.log"; fail "did not resume from step $step"; }
grown=$(grown_record "$out" 3 4 command)
grep -q "\"kind\": \"membership\", \"step\": $step, " <<<"$grown" || fail "the grown record is not at step $step: $grown"
[[ $(grep -c '"kind": "membership"' "$out/metrics.jsonl") == 2 ]] || fail "expected 2 membership records (shrink, grown)"
grep -q "membership: grown back from 3 to 4 replica(s) at step $step (command); downtime " "$out.log" ||
  { cat "$out.log"; fail "no grown line with the downtime"; }
"$MIRRORED" info --ranks "$out" >"$WORK/info.out" 2>&1 || { cat "$WORK/info.out"; fail "info --ranks"; }
grep -q "step $step: world size 4, grown from 3 (command), downtime " "$WORK/info.out" ||
  { cat "$WORK/info.out"; fail "info --ranks does not show the growth"; }
last_world_size "$out" 4
no_leftovers "$out"
echo "ok: 4 -> 3 (killed rank 2) -> 4 (mirrored resize): exit 0, final.h5 bit-identical; $(grep -o 'downtime [0-9.]* s' "$out.log")"
echo "grow_back: ok in $((SECONDS - start)) s"
