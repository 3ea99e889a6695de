#!/usr/bin/env bash
# Growing back across hosts, through launch/multinode.sh: 2 network-namespace hosts x 2 ranks,
# sgd mlp, reduction = invariant, on_failure = shrink. Both ranks of h2 killed after step 10
# (its daemon alive): the job goes on with h1's 2 ranks; `mirrored resize RUN_DIR` (run from
# here, the run-state directory is in the launch's working directory): the job writes a
# checkpoint and exits 11, multinode.sh relaunches it on both hosts with 4 ranks, and it
# finishes with exit 0, final.h5 bit-identical to the uninterrupted 2x2 run's, a membership
# record with "grown" (2 -> 4), nothing left running. Needs the system lock (namespace hosts).
# The host-returned trigger is not run here: nsrsh reaches a namespace whatever its link, so
# a host cannot go silent for the probe (it.grow_back_hosts tests that check on its own).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_data
require_ulfm
require_netns
start=$SECONDS
netns_up 2
# 250 steps: after the shrink (about step 15), h1's 2 ranks must still be training when
# `mirrored resize` reaches them. It did at steps 30 and 48 with a load of 9 to 12, with 150
# steps of about 80 ms; 250 double what was left, at 16 s more (400 cost 40 s more).
common=("${FMNIST_MLP_ARGS[@]}" --batch_size 120 --max_steps 250 --reduction invariant --on_failure shrink)
H2=${NETNS_PREFIX}h2

cd "$WORK" || exit 1  # multinode.sh makes the run-state directory in the working directory
on_hosts 2 2 train "${common[@]}" --out "$WORK/full" >"$WORK/full.log" 2>&1 || { cat "$WORK/full.log"; fail "uninterrupted 2x2 run"; }
out=$WORK/grown
on_hosts 2 2 train "${common[@]}" --out "$out" >"$out.log" 2>&1 &
job=$!
wait_for_step "$out" 10 "$job"
victims=$(host_ranks "$H2")
[[ $(wc -w <<<"$victims") == 2 ]] || fail "h2 does not hold 2 ranks: $victims"
# shellcheck disable=SC2086  # a list of pids
kill -9 $victims
wait_for "$out/metrics.jsonl" '"kind": "membership", .*"world_size": 2,' "the shrink"
"$MIRRORED" resize "$out" >"$WORK/resize.out" 2>&1 || { cat "$WORK/resize.out"; fail "mirrored resize"; }
status=0
wait "$job" || status=$?
((status == 0)) || { cat "$out.log"; fail "the grown job exited $status"; }
grep -q "exit 11): relaunching it at its configured size" "$out.log" || { cat "$out.log"; fail "multinode.sh did not relaunch"; }
"$COMPARE" "$WORK/full/final.h5" "$out/final.h5" --exact ||
  fail "2x2 -> 2 -> 2x2 (reduction = invariant): final.h5 is not bit-identical to the uninterrupted run's"
grown_record "$out" 2 4 command >/dev/null
[[ $(grep -c "\"host\": \"${NETNS_PREFIX}-h2\"" "$out/ranks.jsonl") == 2 ]] || { cat "$out/ranks.jsonl"; fail "h2 holds no 2 ranks after the relaunch"; }
nothing_left_on_hosts "the grown job"
echo "ok: 2x2 -> 2 (h2's ranks killed) -> 2x2 (mirrored resize, relaunched by multinode.sh): exit 0, final.h5" \
     "bit-identical; $(grep -o 'downtime [0-9.]* s' "$out.log")"
grep -E "resize requested|relaunching it|grown back from" "$out.log"
echo "grow_back_host: ok in $((SECONDS - start)) s"
