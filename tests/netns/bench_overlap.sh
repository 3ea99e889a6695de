#!/usr/bin/env bash
# Overlap of gradient all-reduce with backward on a slow network: 2 namespace hosts x 1
# rank, every host link shaped to RATE (tbf), `mirrored train` with overlap true and false.
# Prints samples/s and the per-step all-reduce time (comm_ms) and the part of it the main
# thread waited for (exposed_comm_ms), from metrics.jsonl; asserts nothing about speed.
# usage: tests/netns/bench_overlap.sh BUILD_DIR [RATE=1gbit] [STEPS=60]   (root; data imported)
#   env: DATA_DIR (default data/fashion-mnist), HIDDEN (1024,1024), BUCKET_MB (2), BATCH (512)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: bench_overlap.sh BUILD_DIR [RATE] [STEPS]}" && pwd)
RATE=${2:-1gbit} STEPS=${3:-60}
DATA_DIR=${DATA_DIR:-$HERE/../../data/fashion-mnist}
HIDDEN=${HIDDEN:-1024,1024} BUCKET_MB=${BUCKET_MB:-2} BATCH=${BATCH:-512}
export NETNS_PREFIX=${NETNS_PREFIX:-mb$$}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-bench.XXXXXX")
trap '"$HERE/cluster.sh" down 2; rm -rf "$WORK"' EXIT
"$HERE/cluster.sh" up 2 "$RATE"

log_every=$((STEPS / 3))
printf '%-8s %-8s %12s %10s %10s %12s\n' rate overlap samples/s ms/step comm_ms exposed_ms
for overlap in true false; do
  timeout -k 5 300 "$HERE/cluster.sh" mpirun 2 1 2 "$BUILD/mirrored" train \
    --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --model.hidden "$HIDDEN" \
    --batch_size "$BATCH" --epochs 1 --max_steps "$STEPS" --log_every "$log_every" --threads 1 \
    --bucket_mb "$BUCKET_MB" --overlap "$overlap" --out "$WORK/$overlap" --quiet >"$WORK/$overlap.log" 2>&1 ||
    { cat "$WORK/$overlap.log"; exit 1; }
  # The last interval's record: past the first steps' one-time costs.
  python3 - "$WORK/$overlap/metrics.jsonl" "$RATE" "$overlap" "$BATCH" <<'PY'
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if '"kind": "train"' in l][-1]
print(f"{sys.argv[2]:<8} {sys.argv[3]:<8} {rec['samples_per_sec']:12.0f} {float(sys.argv[4]) * 1e3 / rec['samples_per_sec']:10.2f}"
      f" {rec['comm_ms']:10.2f} {rec['exposed_comm_ms']:12.2f}")
PY
done
echo "(2 hosts x 1 rank, MLP 784-${HIDDEN//,/-}-10, global batch $BATCH, bucket_mb $BUCKET_MB, last $log_every of $STEPS steps)"
