#!/usr/bin/env bash
# mirrored bench checkpoint: five runs of the same training (none, every 3 steps in the step
# and in the background, every step both ways) with exactly the checkpoints each should
# write, the ratio line, and its files removed afterwards. Timings are printed, not checked.
source "$(dirname "$0")/lib.sh"
require_data
"$MIRRORED" bench checkpoint --steps 6 --warmup 1 --every 3 --threads 1 --data.train "$DATA_DIR/test.h5" \
  --data.test "$DATA_DIR/test.h5" --batch_size 64 --model.hidden 64 --out "$WORK/run" >"$WORK/out" 2>&1 ||
  { cat "$WORK/out"; fail "bench checkpoint failed"; }
cat "$WORK/out"
# expect_row NAME EVERY WRITTEN
expect_row() {
  grep -qE "^  $1 +$2  $3  [0-9.]+  [0-9.]+  " "$WORK/out" || fail "no row '$1' every $2 with $3 checkpoints"
}
expect_row none 0 0
expect_row synchronous 3 2
expect_row 'background \(async\)' 3 2
expect_row synchronous 1 6
expect_row 'background \(async\)' 1 6
grep -qE '^async_vs_sync in_step_stall=[0-9.]+ every_step_cost_sync=[0-9.]+ every_step_cost_async=[0-9.]+$' \
  "$WORK/out" || fail "no ratio line"
[[ ! -e "$WORK/run/bench-checkpoints" ]] || fail "the benchmark's checkpoints were left in $WORK/run"
echo "bench_checkpoint: ok"
