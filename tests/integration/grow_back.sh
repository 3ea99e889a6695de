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
# Steps of this mlp take milliseconds: 400 of them leave the 3 survivors a few seconds for the
# second `mirrored resize` to arrive (150 left too little on a loaded 2-core machine).
source "$(dirname "$0")/lib.sh"
require_data
info=$("$MIRRORED" info 2>/dev/null) || fail "mirrored info failed"
grep -q "^  ulfm  *available (" <<<"$info" ||
  { echo "SKIP: this binary has no ULFM (built against $(command -v mpirun)); launch/install_openmpi.sh + launch/build.sh"; exit 77; }
start=$SECONDS
common=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --batch_size 128 --epochs 1
        --max_steps 400 --model.hidden 256,128 --lr 0.05 --momentum 0.9 --seed 5 --threads 1 --log_every 5
        --checkpoint.every_epochs 0 --progress plain --reduction invariant --on_failure shrink)
local_run() {  # local_run OUT: launch/local.sh 4 ranks writing OUT, with a time limit
  timeout -k 5 120 "$SOURCE_DIR/launch/local.sh" 4 "$MIRRORED" train "${common[@]}" --out "$1"
}
# wait_for FILE PATTERN WHAT: until FILE has a line matching PATTERN (grep -E), at most 30 s.
wait_for() {
  for _ in $(seq 600); do grep -Eq "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  fail "$3: no line matching '$2' in $1 within 30 s"
}
# rank_process OUT RANK: the pid of rank RANK itself (not its rank agent, which shares its
# command line: only the rank has MIRRORED_RANK_AGENT_FD).
rank_process() {
  local pid
  for pid in $(pgrep -f -- "--out $1( |$)"); do
    grep -qz '^MIRRORED_RANK_AGENT_FD=' "/proc/$pid/environ" 2>/dev/null || continue
    grep -qzE "^(PMIX_RANK|OMPI_COMM_WORLD_RANK)=$2\$" "/proc/$pid/environ" 2>/dev/null && { echo "$pid"; return; }
  done
}

# The uninterrupted run beside the one that grows (most of a launch is waiting: the test
# takes half the time).
local_run "$WORK/full" >"$WORK/full.log" 2>&1 &
full=$!

out="$WORK/grown"
local_run "$out" >"$out.log" 2>&1 &
job=$!
wait_for "$out/metrics.jsonl" '"kind": "train", "step": 5,' "the run"
"$MIRRORED" resize "$out" >"$WORK/resize_full.out" 2>&1 || { cat "$WORK/resize_full.out"; fail "mirrored resize (full size)"; }
wait_for "$out.log" 'resize requested \(command\): ignored, the job runs at its full size \(4 replica' \
  "resize at full size"
echo "ok: resize at full size ignored: $(grep -o 'resize requested (command): ignored[^;]*' "$out.log")"
victim=$(rank_process "$out" 2)
[[ -n "$victim" ]] || fail "rank 2 of $out not found"
kill -9 "$victim"
wait_for "$out/metrics.jsonl" '"kind": "membership", .*"world_size": 3, "lost": \[\{"rank": 2,' "the shrink"
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
grown=$(grep '"grown"' "$out/metrics.jsonl") || { cat "$out/metrics.jsonl"; fail "no grown record"; }
grep -Eq "\"kind\": \"membership\", \"step\": $step, \"world_size\": 4, \"lost\": \[\], \"grown\": \[\{\"from_world\": 3, \"to_world\": 4, \"downtime_s\": [0-9.e+-]+, \"trigger\": \"command\", \"stopped_ms\": [0-9]+, \"first_step_ms\": [0-9]+\}\]" <<<"$grown" ||
  fail "grown record: $grown"
[[ $(grep -c '"kind": "membership"' "$out/metrics.jsonl") == 2 ]] || fail "expected 2 membership records (shrink, grown)"
grep -q "membership: grown back from 3 to 4 replica(s) at step $step (command); downtime " "$out.log" ||
  { cat "$out.log"; fail "no grown line with the downtime"; }
"$MIRRORED" info --ranks "$out" >"$WORK/info.out" 2>&1 || { cat "$WORK/info.out"; fail "info --ranks"; }
grep -q "step $step: world size 4, grown from 3 (command), downtime " "$WORK/info.out" ||
  { cat "$WORK/info.out"; fail "info --ranks does not show the growth"; }
[[ $(grep '"kind": "train"' "$out/metrics.jsonl" | tail -1 | grep -c '"world_size": 4') == 1 ]] ||
  fail "the last train record does not say world_size 4"
sleep 0.5
left=$(pgrep -f -- "--out $out( |$)" || true)
[[ -z "$left" ]] || { kill -9 $left; fail "processes left behind: $left"; }
echo "ok: 4 -> 3 (killed rank 2) -> 4 (mirrored resize): exit 0, final.h5 bit-identical; $(grep -o 'downtime [0-9.]* s' "$out.log")"
echo "grow_back: ok in $((SECONDS - start)) s"
