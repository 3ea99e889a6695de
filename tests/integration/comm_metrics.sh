#!/usr/bin/env bash
# comm_ms and exposed_comm_ms (docs/communication.md#watching-communication): exposed is the
# part of the step's communication after backward ended, so in every train record of a
# 2-rank run, in each overlap mode, 0 <= exposed_comm_ms <= comm_ms; with overlap = off
# (every bucket starts after backward) both are positive.
source "$(dirname "$0")/lib.sh"
require_data
common=(--data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5" --batch_size 64 --epochs 1
        --max_steps 40 --log_every 2 --threads 1 --bucket_mb 0.05 --progress off)
for overlap in thread inline off; do
  mpirun_np 2 train "${common[@]}" --overlap "$overlap" --out "$WORK/$overlap" > "$WORK/$overlap.log" 2>&1 ||
    { cat "$WORK/$overlap.log"; fail "overlap = $overlap: the run failed"; }
  python3 - "$WORK/$overlap/metrics.jsonl" "$overlap" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1]) if '"kind": "train"' in line]
if len(records) < 15:
    sys.exit(f"FAIL: overlap = {sys.argv[2]}: {len(records)} train records, expected 20")
bad = [r for r in records if not (0 <= r["exposed_comm_ms"] <= r["comm_ms"])]
if bad:
    sys.exit(f"FAIL: overlap = {sys.argv[2]}: exposed_comm_ms > comm_ms (or negative) in {len(bad)} of "
             f"{len(records)} records, e.g. step {bad[0]['step']}: comm {bad[0]['comm_ms']}, "
             f"exposed {bad[0]['exposed_comm_ms']}")
if sys.argv[2] == "off" and not all(r["comm_ms"] > 0 and r["exposed_comm_ms"] > 0 for r in records):
    sys.exit("FAIL: overlap = off: a record without communication time")
comm = sum(r["comm_ms"] for r in records) / len(records)
exposed = sum(r["exposed_comm_ms"] for r in records) / len(records)
print(f"ok: overlap = {sys.argv[2]}: exposed <= comm in all {len(records)} records "
      f"(mean comm {comm:.3f} ms, exposed {exposed:.3f} ms)")
PY
done
