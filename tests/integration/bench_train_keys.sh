#!/usr/bin/env bash
# `mirrored bench train` runs the configuration it is given: the reducer keys (bucket_mb,
# overlap, grad_compression, accumulate_steps) change its gradient buckets, where the
# all-reduces run (its --timeline) and its numerics, exactly as for `mirrored train`.
source "$(dirname "$0")/lib.sh"
require_data

# bench NAME ARGS... : 2 ranks, 1 warm-up + 3 timed steps, a timeline of every step.
bench() {
  local name=$1; shift
  timeout -k 5 120 "$SOURCE_DIR/launch/local.sh" 2 "$MIRRORED" bench train --steps 3 --warmup 1 --threads 1 \
    --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --timeline "$WORK/$name.json" "$@" \
    >"$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; fail "$name: bench train failed"; }
  grep -q '^samples_per_sec=[0-9.]* ms_per_step=[0-9.]*$' "$WORK/$name.out" ||
    { cat "$WORK/$name.out"; fail "$name: no samples_per_sec=... ms_per_step=... line"; }
  # The step against its bound (FLOPs at the sgemm rate) and its CPU time, on a CPU.
  grep -q '^fraction_of_bound=[0-9.]* fraction_of_bound_cpu=[0-9.]*$' "$WORK/$name.out" &&
    grep -q '^  CPU time/step/rank: [0-9.]* ms$' "$WORK/$name.out" ||
    { cat "$WORK/$name.out"; fail "$name: no fraction_of_bound=... line or CPU time per step"; }
}
setup_line() { grep -E '^  [0-9]+ gradient bucket\(s\)' "$WORK/$1.out"; }
loss_of() { sed -nE 's/.*loss of the last step \(mean over ranks\): (.*)/\1/p' "$WORK/$1.out"; }
# spans NAME CATEGORY : "<count> <thread ids>" of the timeline's spans of CATEGORY.
spans() {
  python3 -c '
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == sys.argv[2]]
print(len(events), " ".join(sorted({str(e["tid"]) for e in events})))' "$WORK/$1.json" "$2"
}

bench base
bench buckets --bucket_mb 0.1
bench thread --overlap thread
bench off --overlap off
bench bf16 --grad_compression bf16
bench accumulate --accumulate_steps 2
bench repeated --overlap off --bucket_mb 0.1 --overlap thread  # the last flag wins
bench precision_bf16 --precision bf16
for name in base buckets thread off bf16 accumulate repeated; do echo "$name: $(setup_line $name)  loss $(loss_of $name)"; done

[[ "$(setup_line base)" == "  1 gradient bucket(s), overlap auto, compression none, allreduce flat, accumulate 1" ]] ||
  fail "base: unexpected set-up line '$(setup_line base)'"
[[ "$(setup_line buckets)" == "  2 gradient bucket(s), overlap auto,"* ]] || fail "bucket_mb 0.1 did not give 2 buckets"
[[ "$(setup_line off)" == *"overlap off,"* ]] || fail "overlap off not applied"
[[ "$(setup_line bf16)" == *"compression bf16,"* ]] || fail "grad_compression bf16 not applied"
[[ "$(setup_line accumulate)" == *"accumulate 2" ]] || fail "accumulate_steps 2 not applied"
[[ "$(setup_line repeated)" == "  2 gradient bucket(s), overlap thread,"* ]] || fail "repeated flags: the last should win"

# Where the all-reduces ran: the communication thread (tid 1) with overlap thread, the main
# thread (tid 0) with overlap off; one span per bucket and step (3 recorded steps x 2 ranks).
[[ "$(spans thread allreduce)" == "6 1" ]] || fail "overlap thread: all-reduce spans '$(spans thread allreduce)', expected 6 on tid 1"
[[ "$(spans off allreduce)" == "6 0" ]] || fail "overlap off: all-reduce spans '$(spans off allreduce)', expected 6 on tid 0"
[[ "$(spans base allreduce)" == "6 "* && "$(spans buckets allreduce)" == "12 "* ]] ||
  fail "bucket_mb 0.1: all-reduce spans '$(spans buckets allreduce)', expected twice the 6 of one bucket"
# Two micro-batches per update: twice the data spans, the same number of optimizer steps.
[[ "$(spans accumulate data)" == "12 0" && "$(spans accumulate optimizer)" == "6 0" ]] ||
  fail "accumulate_steps 2: data '$(spans accumulate data)', optimizer '$(spans accumulate optimizer)'"
# Numerics: bf16 gradients and a doubled update batch change the loss; overlap does not.
[[ "$(loss_of off)" == "$(loss_of base)" && "$(loss_of thread)" == "$(loss_of base)" ]] ||
  fail "overlap changed the loss: off $(loss_of off), thread $(loss_of thread), auto $(loss_of base)"
[[ "$(loss_of bf16)" != "$(loss_of base)" ]] || fail "grad_compression bf16 left the loss unchanged"
[[ "$(loss_of accumulate)" != "$(loss_of base)" ]] || fail "accumulate_steps 2 left the loss unchanged"
# A bf16 step is also set against the bf16 product's rate; a float32 step is not.
grep -qE '^fraction_of_bf16_bound=[0-9.]+ fraction_of_bf16_bound_cpu=[0-9.]+$' "$WORK/precision_bf16.out" &&
  grep -qE '^  bf16 bound: .* at the 512\^3 bf16 product rate of [0-9.]+ GFLOP/s \(' "$WORK/precision_bf16.out" ||
  { cat "$WORK/precision_bf16.out"; fail "precision bf16: no bf16 bound line"; }
! grep -q 'bf16_bound' "$WORK/base.out" || fail "a float32 step printed a bf16 bound"
echo "ok: bench train honours bucket_mb, overlap, grad_compression and accumulate_steps"
