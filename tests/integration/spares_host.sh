#!/usr/bin/env bash
# Hot spares across hosts: 2 network-namespace hosts x 2 ranks train, a third host's 2 ranks
# are spares (launch/multinode.sh NP = 4 with shrink.spares = 2 starts 6 ranks, the spares on
# the hostfile's last host). sgd mlp, fast reduction, flat all-reduce. Every process of h2
# killed after step 10, its Open MPI daemon too (a whole node lost: the runtime ends the job,
# the ranks started through `mirrored rank-agent` outlive it): h3's ranks take world ranks
# 2 and 3 in order, the job finishes at world 4 and exits 0, final.h5 bit-identical to the
# uninterrupted 2 x 2 run, the membership record names both replacements (h2 by h3), and
# nothing is left running on any host.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_data
require_ulfm
require_netns
start=$SECONDS
netns_up 3
common=("${FMNIST_MLP_ARGS[@]}" --batch_size 120 --max_steps 60 --allreduce flat --on_failure shrink)
H2=${NETNS_PREFIX}h2

on_hosts_np 2 2 4 train "${common[@]}" --out "$WORK/full" >"$WORK/full.log" 2>&1 ||
  { cat "$WORK/full.log"; fail "uninterrupted 2x2 run"; }

out=$WORK/spare_host
on_hosts_np 3 2 4 train "${common[@]}" --shrink.spares 2 --out "$out" >"$out.log" 2>&1 &
job=$!
wait_for_step "$out" 10 "$job"
[[ $(grep -c "${NETNS_PREFIX}-h3" "$out/ranks.jsonl" 2>/dev/null || true) == 0 ]] ||
  fail "a spare on h3 trains before any loss: $(cat "$out/ranks.jsonl")"
victims=$(host_pids "$H2")
# shellcheck disable=SC2086  # a list of pids
kill -9 $victims
status=0
wait "$job" || status=$?
((status == 0)) || { cat "$out.log"; fail "every process of h2 killed: the job exited $status"; }
nothing_left_on_hosts "every process of h2 killed"
"$COMPARE" "$WORK/full/final.h5" "$out/final.h5" --exact ||
  fail "h2 replaced by h3: not bit-identical to the uninterrupted 2 x 2 run"
membership=$(grep '"kind": "membership"' "$out/metrics.jsonl") || { cat "$out.log"; fail "no membership record"; }
grep -q "\"world_size\": 4, \"lost\": \[\], \"replaced\": \[{\"rank\": 2, \"host\": \"${NETNS_PREFIX}-h2\", \"by_host\": \"${NETNS_PREFIX}-h3\"}, {\"rank\": 3, \"host\": \"${NETNS_PREFIX}-h2\", \"by_host\": \"${NETNS_PREFIX}-h3\"}\], \"spares_lost\": \[\], \"spares\": 0, \"recovery_s\": " <<<"$membership" ||
  { cat "$out.log"; fail "membership record: $membership"; }
last_world_size "$out" 4
echo "ok: every process of h2 killed after step 10: h3's spares took ranks 2 and 3, bit-identical at world 4; $membership"
echo "spares_host: ok in $((SECONDS - start)) s"
