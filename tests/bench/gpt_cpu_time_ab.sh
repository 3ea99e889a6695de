#!/usr/bin/env bash
# The gpt recipe's step at 1 rank and 1 thread in CPU time, two mirrored binaries side by
# side (a "before" and an "after"), each in float32 and bf16, and PyTorch 2 (eager, SDPA):
# REPEATS sets alternating the sides, each side's CPU time per step (user + system of a
# LONG-step run less a SHORT-step one, over the difference: start-up and warm-up cancel)
# and its wall ms/step, then the medians, the step against its bound (bench train's 3928
# MFLOP at the 512^3 sgemm rate it prints in CPU time) and the ratios. On a host shared
# with other work CPU time moves by a few percent where wall time swings by 2x.
#   tests/bench/gpt_cpu_time_ab.sh BEFORE_BINARY AFTER_BINARY
# Environment: REPEATS (3), LONG (100), SHORT (10), PYTORCH2 (a venv holding PyTorch 2;
# none: no PyTorch column), OPENBLAS_CORETYPE (default: what AFTER_BINARY runs; every side
# gets the same).
set -euo pipefail
cd "$(dirname "$0")/../.."
before=${1:?usage: $0 BEFORE_BINARY AFTER_BINARY} after=${2:?usage: $0 BEFORE_BINARY AFTER_BINARY}
repeats=${REPEATS:-3} long=${LONG:-100} short=${SHORT:-10}
python2=${PYTORCH2:-}
[[ -d $python2 ]] && python2=$python2/bin/python
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$after" info | sed -nE 's/^  blas core +([A-Za-z0-9]+).*/\1/p')}
export OPENBLAS_CORETYPE
config=launch/configs/shakespeare_gpt.ini
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run_side NAME STEPS COMMAND...: appends "cpu_seconds wall_ms_per_step" to $out/NAME.STEPS
run_side() {
  local name=$1 steps=$2
  shift 2
  local log="$out/log"
  /usr/bin/time -f "%U %S" -o "$out/time" "$@" >"$log" 2>&1 || { cat "$log"; exit 1; }
  local cpu wall
  cpu=$(awk '{print $1 + $2}' "$out/time")
  wall=$(sed -nE 's/.*ms_per_step=([0-9.]+).*/\1/p' "$log" | tail -1)
  # The bound on the CPU clock: the sgemm rate bench train measured in CPU time.
  [[ $name == after-fp32 && $steps == "$long" ]] && sed -nE 's/.*\(([0-9.]+) GFLOP\/s of CPU time.*/\1/p' "$log" >>"$out/sgemm"
  echo "$cpu ${wall:-0}" >>"$out/$name.$steps"
}

mirrored_side() {  # NAME BINARY PRECISION
  for steps in "$long" "$short"; do
    run_side "$1" "$steps" "$2" bench train --config "$config" --threads 1 --warmup 5 --steps "$steps" --precision "$3"
  done
}

echo "gpt recipe, 1 rank x 1 thread, OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, $repeats sets of $long less $short steps"
for ((r = 1; r <= repeats; ++r)); do
  mirrored_side before-fp32 "$before" fp32
  mirrored_side after-fp32 "$after" fp32
  mirrored_side before-bf16 "$before" bf16
  mirrored_side after-bf16 "$after" bf16
  if [[ -n $python2 ]]; then
    for steps in "$long" "$short"; do
      run_side pytorch2 "$steps" "$python2" tests/bench/gpt_train_pytorch.py --world 1 --threads 1 \
        --eval-windows -1 --steps "$steps" --warmup-timing 5
    done
  fi
done

# The medians and ratios, in Python for the arithmetic.
python3 - "$out" "$long" "$short" <<'EOF'
import os, statistics, sys
out, long_steps, short_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rows(name, steps):
    path = os.path.join(out, f"{name}.{steps}")
    return [tuple(map(float, line.split())) for line in open(path)] if os.path.exists(path) else []
sgemm = [float(x) for x in open(os.path.join(out, "sgemm")).read().split()]
bound_ms = 3928.2 / statistics.median(sgemm)
cpu = {}
print(f"bound: 3928.2 MFLOP at the median sgemm {statistics.median(sgemm):.1f} GFLOP/s of CPU time = {bound_ms:.2f} ms")
print(f"{'side':<12} {'CPU ms/step (median, range)':<30} {'wall ms/step':<14} of the bound")
for name in ["before-fp32", "after-fp32", "before-bf16", "after-bf16", "pytorch2"]:
    longs, shorts = rows(name, long_steps), rows(name, short_steps)
    if not longs:
        continue
    per_set = [(l[0] - s[0]) * 1e3 / (long_steps - short_steps) for l, s in zip(longs, shorts)]
    cpu[name] = statistics.median(per_set)
    wall = statistics.median(l[1] for l in longs)
    span = f"{cpu[name]:.1f} ({min(per_set):.1f}-{max(per_set):.1f})"
    print(f"{name:<12} {span:<30} {wall:<14.1f} {bound_ms / cpu[name] * 100:.0f}%")
def ratio(a, b, what):
    if a in cpu and b in cpu:
        print(f"{what}: {cpu[b] / cpu[a]:.2f}x")
ratio("after-fp32", "before-fp32", "after vs before, fp32")
ratio("after-bf16", "before-bf16", "after vs before, bf16")
ratio("after-bf16", "after-fp32", "after: bf16 vs fp32")
ratio("before-bf16", "before-fp32", "before: bf16 vs fp32")
ratio("after-fp32", "pytorch2", "after fp32 vs PyTorch 2")
ratio("before-fp32", "pytorch2", "before fp32 vs PyTorch 2")
EOF
