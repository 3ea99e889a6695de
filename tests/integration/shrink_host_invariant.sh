#!/usr/bin/env bash
# on_failure = shrink across hosts keeps the bits: 2 network-namespace hosts x 2 ranks
# (launch/multinode.sh), sgd mlp, reduction = invariant, allreduce = flat, global batch 120.
# Rank 1's process (on h1, beside the chief; its rank-agent left alive) is killed after step
# 10; the 3 survivors, on both hosts, go on: the job exits 0, the membership record names
# rank 1, the last train record says world_size 3, and final.h5 and the last evaluation are
# bit for bit the uninterrupted 2 x 2 run's.
# What it guards: Open MPI's HAN collectives, chosen for a communicator spanning hosts,
# returned MPI_SUCCESS from the all-reduce a lost peer interrupted, every survivor holding a
# different partial sum; the survivors then recovered that wrong step (comm/failure/
# fault_tolerance.h, keep_collectives_fault_aware). On one host HAN is not chosen
# (it.shrink_continue).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_data
info=$("$MIRRORED" info 2>/dev/null) || fail "mirrored info failed"
grep -q "^  ulfm  *available (" <<<"$info" ||
  { echo "SKIP: this binary has no ULFM (built against $(command -v mpirun)); launch/install_openmpi.sh + launch/build.sh"; exit 77; }
require_netns
start=$SECONDS
netns_up 2
common=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --batch_size 120 --epochs 1
        --max_steps 40 --model.hidden 256,128 --lr 0.05 --momentum 0.9 --seed 5 --threads 1 --log_every 5
        --checkpoint.every_epochs 0 --progress plain --reduction invariant --allreduce flat)

on_hosts 2 2 train "${common[@]}" --out "$WORK/full" >"$WORK/full.log" 2>&1 || { cat "$WORK/full.log"; fail "uninterrupted 2x2 run"; }

out=$WORK/killed
on_hosts 2 2 train "${common[@]}" --on_failure shrink --out "$out" >"$out.log" 2>&1 &
job=$!
for _ in $(seq 2400); do grep -q '"kind": "train", "step": 10,' "$out/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
# The rank's own process, as ranks.jsonl names it (not its rank-agent, whose loss the rank
# only notices a moment later).
victim=$(sed -nE 's/.*"rank": 1, "host": "[^"]*", "pid": ([0-9]+),.*/\1/p' "$out/ranks.jsonl" | head -1)
[[ -n "$victim" ]] && kill -0 "$victim" 2>/dev/null || { cat "$out.log"; fail "rank 1's process not found in $out/ranks.jsonl"; }
kill -9 "$victim"
status=0
wait "$job" || status=$?
((status == 0)) || { cat "$out.log"; fail "rank 1 killed: the job exited $status"; }
[[ -s "$out/final.h5" ]] || { cat "$out.log"; fail "no final.h5"; }
membership=$(grep '"kind": "membership"' "$out/metrics.jsonl") || { cat "$out.log"; fail "no membership record"; }
grep -Eq "\"world_size\": 3, \"lost\": \[\{\"rank\": 1, \"host\": \"${NETNS_PREFIX}-h1\"\}\], \"recovery_s\": " <<<"$membership" ||
  { cat "$out.log"; fail "membership record: $membership"; }
[[ $(grep '"kind": "train"' "$out/metrics.jsonl" | tail -1 | grep -c '"world_size": 3') == 1 ]] ||
  fail "the last train record does not say world_size 3"
"$COMPARE" "$WORK/full/final.h5" "$out/final.h5" --exact ||
  { grep -v "^NBC_\|^Error in NBC" "$out.log"; fail "rank 1 killed: final.h5 is not bit-identical to the uninterrupted run's"; }
evaluation() { grep '"kind": "eval"' "$1/metrics.jsonl" | tail -1 | sed -E 's/.*("test_loss": [^,]*, "test_accuracy": [^,}]*).*/\1/'; }
full_eval=$(evaluation "$WORK/full") killed_eval=$(evaluation "$out")
[[ -n "$full_eval" && "$full_eval" == "$killed_eval" ]] ||
  fail "the last evaluation differs: uninterrupted {$full_eval}, shrunk {$killed_eval}"
echo "ok: rank 1 killed after step 10 on 2 hosts x 2 (invariant, flat): finished on 3 ranks across both hosts," \
     "final.h5 bit-identical, evaluation {$killed_eval} the same; $membership"

netns_down
[[ -z "$(ip netns list | grep "^${NETNS_PREFIX}")" ]] || fail "namespaces left behind"
echo "shrink_host_invariant: ok in $((SECONDS - start)) s"
