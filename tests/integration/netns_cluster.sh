#!/usr/bin/env bash
# MultiWorkerMirroredStrategy across hosts: real TCP between network-namespace hosts, each
# with its own host name, launched by launch/multinode.sh with a hostfile. 2 hosts x 2
# ranks (flat and hierarchical all-reduce) and 3 hosts x 1 rank must train the same model
# as one process, up to float summation order; hierarchical must equal flat the same way.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_data
require_netns
start=$SECONDS
netns_up 3
common=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --batch_size 60 --epochs 1
        --max_steps 40 --model.hidden 64,32 --lr 0.05 --momentum 0.9 --seed 11 --threads 1 --log_every 20)
"$MIRRORED" train "${common[@]}" --quiet --out "$WORK/single"

on_hosts 2 2 train "${common[@]}" --allreduce auto --out "$WORK/h2x2_auto" >"$WORK/auto.log" 2>&1 ||
  { cat "$WORK/auto.log"; fail "2x2 auto run failed"; }
# The table names 2 hosts with local ranks 0,1 each, and auto picks the two-level reduce
# over MPI's 2 shared-memory nodes.
grep -q "4 rank(s) on 2 node(s)" "$WORK/auto.log" || { cat "$WORK/auto.log"; fail "cluster table lacks 2 nodes"; }
grep -Eq "^3 +${NETNS_PREFIX}-h2 +1 +1 " "$WORK/auto.log" || { cat "$WORK/auto.log"; fail "rank 3 not on h2 local 1"; }
grep -q "gradient all-reduce: hierarchical (2 node leader(s), 4 ranks)" "$WORK/auto.log" ||
  { cat "$WORK/auto.log"; fail "auto did not choose the hierarchical all-reduce"; }

on_hosts 2 2 train "${common[@]}" --allreduce flat --out "$WORK/h2x2_flat" >"$WORK/flat.log" 2>&1 ||
  { cat "$WORK/flat.log"; fail "2x2 flat run failed"; }
grep -q "gradient all-reduce: flat" "$WORK/flat.log" || { cat "$WORK/flat.log"; fail "flat not used"; }
on_hosts 3 1 train "${common[@]}" --out "$WORK/h3x1" >"$WORK/h3x1.log" 2>&1 ||
  { cat "$WORK/h3x1.log"; fail "3x1 run failed"; }
grep -q "3 rank(s) on 3 node(s)" "$WORK/h3x1.log" || { cat "$WORK/h3x1.log"; fail "3x1 table"; }
grep -q "gradient all-reduce: flat (3 ranks on 3 node(s), Open MPI nonblocking algorithm ring)" "$WORK/h3x1.log" ||
  { cat "$WORK/h3x1.log"; fail "auto should stay flat with one rank per node"; }

# Tolerance: see world_size_equivalence.sh (float32 summation order only, 20x headroom).
for run in h2x2_auto h2x2_flat h3x1; do
  [[ -s "$WORK/$run/final.h5" && -s "$WORK/$run/metrics.jsonl" ]] || fail "$run left no final.h5/metrics"
  "$COMPARE" "$WORK/single/final.h5" "$WORK/$run/final.h5" --rtol 1e-5
done
"$COMPARE" "$WORK/h2x2_flat/final.h5" "$WORK/h2x2_auto/final.h5" --rtol 1e-5
netns_down
[[ -z "$(ip netns list | grep "^${NETNS_PREFIX}")" ]] || fail "namespaces left behind"
echo "netns_cluster: ok in $((SECONDS - start)) s"
