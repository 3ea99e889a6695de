#!/usr/bin/env bash
# The communication engine end to end on real data: overlapped buckets give the same model
# as all-reducing after backward; gradient accumulation equals a larger batch; the
# timeline is valid Chrome-trace JSON with every span kind.
source "$(dirname "$0")/lib.sh"
require_data
common=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --epochs 1 --max_steps 40
        --model.hidden 64,32 --lr 0.05 --momentum 0.9 --seed 5 --threads 1 --quiet --bucket_mb 0.005)
mpirun_np 2 train "${common[@]}" --batch_size 64 --overlap true --out "$WORK/overlap" \
  --timeline "$WORK/trace.json" --timeline_steps 5
mpirun_np 2 train "${common[@]}" --batch_size 64 --overlap false --out "$WORK/sequential"
"$COMPARE" "$WORK/overlap/final.h5" "$WORK/sequential/final.h5" --exact

# 2 micro-batches of 32 per update == batches of 64: the same samples per update, summed
# in another order (float rounding only; see world_size_equivalence.sh for the budget).
mpirun_np 2 train "${common[@]}" --batch_size 32 --accumulate_steps 2 --out "$WORK/accumulate"
"$COMPARE" "$WORK/overlap/final.h5" "$WORK/accumulate/final.h5" --rtol 1e-5

python3 - "$WORK/trace.json" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
kinds = {e["cat"] for e in events}
missing = {"data", "forward", "backward", "allreduce", "optimizer"} - kinds
assert not missing, f"span kinds missing from the timeline: {missing}"
assert {e["pid"] for e in events} == {0, 1}, "both ranks must appear"
buckets = {e["name"] for e in events if e["cat"] == "allreduce"}
assert len(buckets) > 1, f"expected several buckets, saw {buckets}"
layers = {e["name"] for e in events if e["cat"] == "backward"}
assert len(layers) == 5, f"expected a backward span per layer, saw {layers}"
print(f"timeline ok: {len(events)} spans, kinds {sorted(kinds)}, {len(buckets)} buckets")
PY
