#!/usr/bin/env bash
# `mirrored bench train --scaling` at 2 ranks: the 1-replica baseline runs as a world of
# one (every core, the whole global batch) and the summary relates the two; core binding
# puts the two ranks on different CPUs when the host has two cores for them, and
# `bind_cores = off` leaves the affinity as the launcher left it.
source "$(dirname "$0")/lib.sh"
require_data

run() {
  local name=$1; shift
  timeout -k 5 120 "$SOURCE_DIR/launch/local.sh" 2 "$MIRRORED" bench train --steps 3 --warmup 1 \
    --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" "$@" >"$WORK/$name.out" 2>&1 ||
    { cat "$WORK/$name.out"; fail "$name: bench train failed"; }
}

run scaling --scaling
out=$WORK/scaling.out
grep -q '^mirrored bench train: model mlp, 2 replica(s) x 64 = global batch 128' "$out" ||
  { cat "$out"; fail "the measured run is not 2 replicas x 64"; }
grep -q '^  | mirrored bench train: model mlp, 1 replica(s) x 128 = global batch 128' "$out" ||
  { cat "$out"; fail "the baseline is not 1 replica with the whole global batch"; }
summary=$(grep -E '^scaling_efficiency=[0-9.]+ speedup=[0-9.]+ replicas=2 baseline_samples_per_sec=[0-9.]+$' "$out") ||
  { cat "$out"; fail "no scaling summary line"; }
# efficiency = samples/s / (2 x baseline), as printed (3 decimals).
python3 - "$summary" "$(grep '^samples_per_sec=' "$out")" <<'PY' || fail "efficiency does not match the printed samples/s"
import re, sys
summary = dict(kv.split("=") for kv in sys.argv[1].split())
run = float(re.search(r"samples_per_sec=([0-9.]+)", sys.argv[2]).group(1))
expected = run / (2 * float(summary["baseline_samples_per_sec"]))
assert abs(expected - float(summary["scaling_efficiency"])) < 1e-3 * max(1.0, expected), (expected, summary)
PY
grep -q '^  comm  peer-wait  in-collective  copies  exposed' "$out" ||
  { cat "$out"; fail "no communication table at 2 ranks"; }

if (($(nproc) >= 2)); then
  grep -q '^core binding: rank 0 cpus [0-9,-]*; rank 1 cpus [0-9,-]*$' "$out" ||
    { cat "$out"; fail "2 ranks on $(nproc) cores were not bound"; }
fi
run off --bind_cores off
if grep -q 'core binding' "$WORK/off.out"; then cat "$WORK/off.out"; fail "bind_cores off still bound"; fi
echo "ok: bench train --scaling relates 2 replicas to 1; ranks bound unless bind_cores = off"
