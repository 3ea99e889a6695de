#!/usr/bin/env bash
# GPU self-test, one command on a machine with an NVIDIA GPU:
#   1. configure and build with CUDA (MIRRORED_CUDA=ON; CUDA_ARCH=NN to change sm_90);
#   2. run the GPU tests (kernels, CPU-vs-GPU agreement, cuDNN wrappers, prefetcher, NCCL
#      at 1 rank and, with >= 2 GPUs, one rank per GPU): none may fail or be skipped;
#   3. a short training on the GPU (model = cnn when the build has it, else mlp): the
#      test accuracy after the last epoch must beat the first epoch's and 0.80;
#   4. throughput next to PyTorch on the same GPU (when torch with CUDA is importable);
# and prints one summary. Without a GPU it says so and exits 0 after the build.
# usage: launch/gpu_selftest.sh [BUILD_DIR]            (default: build-gpu)
# env:   DATA_DIR (default data/fashion-mnist), CUDA_ARCH, SELFTEST_EPOCHS (default 2)
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-gpu}
data=${DATA_DIR:-data/fashion-mnist}
epochs=${SELFTEST_EPOCHS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# NCCL_DEBUG=INFO             # uncomment to see NCCL's transport and ring set-up
# NCCL_DEBUG_SUBSYS=INIT,COLL # narrow that output to init and collectives
declare -a summary
status=0
note() { summary+=("$1"); echo "== $1"; }
fail() { note "FAIL: $1"; status=1; }

# ---- 1. build --------------------------------------------------------------------------
arch=()
[[ -n "${CUDA_ARCH:-}" ]] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH")
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMIRRORED_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" "${arch[@]}" \
     >"$dir.configure.log" 2>&1; then
  cat "$dir.configure.log"; echo "gpu_selftest: configure failed"; exit 1
fi
build_start=$SECONDS
cmake --build "$dir" -j"$(nproc)" --target mirrored unit_tests mpi_tests || { echo "gpu_selftest: build failed"; exit 1; }
note "build: CUDA build of mirrored, unit_tests, mpi_tests in $((SECONDS - build_start)) s ($dir)"
bin=$dir/mirrored

# ---- GPU present? ----------------------------------------------------------------------
gpus=$("$bin" info 2>/dev/null | sed -nE 's/.*\(([0-9]+) GPU\(s\) visible.*/\1/p' | head -1)
if [[ -z "$gpus" || "$gpus" == 0 ]]; then
  echo "gpu_selftest: no usable GPU on this machine ($("$bin" info 2>/dev/null | grep -m1 'GPU(s) visible' | sed 's/^ *//'))"
  echo "gpu_selftest: the CUDA build compiled and linked; GPU tests, training and benchmarks need a GPU. OK."
  exit 0
fi
"$bin" info | sed -n '1,3p;/GPUs per rank/,$p'

# ---- 2. GPU tests ----------------------------------------------------------------------
gpu_filter='*cuda*:*Cuda*:*Gpu*:*Nccl*:DevicePrefetcher.*:DeviceChoice.*'
log=$(mktemp)
"$dir/tests/unit_tests" --gtest_filter="$gpu_filter" --gtest_brief=0 >"$log" 2>&1
unit_rc=$?
passed=$(grep -c '^\[       OK \]' "$log"); skipped=$(grep -c '^\[  SKIPPED \]' "$log")
grep -E '^\[  (FAILED|SKIPPED) \]' "$log" | sort -u | head -20
# Skips of the no-GPU-only checks are expected; a GPU test skipped for want of a GPU is not.
gpu_skips=$(grep -c 'no CUDA device' "$log" || true)
if [[ $unit_rc -ne 0 || $gpu_skips -ne 0 ]]; then
  fail "unit GPU tests: rc $unit_rc, $passed passed, $gpu_skips skipped for want of a GPU (log $log)"
else
  note "unit GPU tests: $passed passed, $skipped skipped (CPU-only checks)"
fi
if command -v mpirun >/dev/null; then
  for np in 1 $([[ $gpus -ge 2 ]] && echo "$gpus"); do
    if timeout 300 mpirun -np "$np" "$dir/tests/mpi_tests" --gtest_filter='Nccl*' >"$log.np$np" 2>&1 &&
       ! grep -q 'SKIPPED' "$log.np$np"; then
      note "NCCL tests at $np rank(s): $(grep -c '^\[       OK \]' "$log.np$np") passed"
    else
      fail "NCCL tests at $np rank(s) (log $log.np$np)"; tail -20 "$log.np$np"
    fi
  done
else
  note "NCCL tests: skipped (no mpirun on this machine)"
fi

# ---- 3. training on the GPU ------------------------------------------------------------
model=mlp
"$bin" train --help 2>/dev/null | grep -q 'cnn' && model=cnn
if [[ ! -s "$data/train.h5" && -x launch/import_fmnist.sh && -d "${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}" ]]; then
  launch/import_fmnist.sh "$bin" >/dev/null
fi
run=$(mktemp -d)
if [[ -s "$data/train.h5" ]]; then
  train_log=$run/train.log
  "$bin" train --config launch/configs/fmnist_mlp.ini --model "$model" --device cuda --epochs "$epochs" \
    --data.train "$data/train.h5" --data.test "$data/test.h5" --out "$run/out" >"$train_log" 2>&1
  train_rc=$?
  accs=$(grep '"kind": "eval"' "$run/out/metrics.jsonl" 2>/dev/null | sed -E 's/.*"test_accuracy": ([^,}]*).*/\1/' | tr '\n' ' ')
  first=$(echo "$accs" | awk '{print $1}'); last=$(echo "$accs" | awk '{print $NF}')
  train_rate=$(sed -nE 's/.*steps, ([0-9]+) samples\/s.*/\1/p' "$train_log" | tail -1)
  if [[ $train_rc -eq 0 && -n "$last" ]] && awk -v f="$first" -v l="$last" -v n="$epochs" \
       'BEGIN { exit !(l >= 0.80 && (n < 2 || l > f)) }'; then
    note "training ($model, $epochs epochs, device cuda): test accuracy by epoch: $accs; $train_rate samples/s"
  else
    fail "training ($model on cuda): rc $train_rc, accuracy by epoch '$accs' (log $train_log)"; tail -20 "$train_log"
  fi
else
  fail "training: no Fashion-MNIST at $data (set DATA_DIR or run launch/import_fmnist.sh)"
fi

# ---- 4. throughput next to PyTorch -----------------------------------------------------
steps=300
if "$bin" bench train --help >/dev/null 2>&1; then
  ours=$("$bin" bench train --model "$model" --device cuda --steps "$steps" 2>&1 | tee "$run/bench.log" |
         sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' | tail -1)
  how="mirrored bench train"
else
  ours=${train_rate:-}
  how="mirrored train (whole run, step 0 excluded)"
fi
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  theirs=$(python3 launch/gpu_torch_baseline.py --model "$model" --steps "$steps" | awk '{print $3}')
  ratio=$(awk -v a="${ours:-0}" -v b="${theirs:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
  note "throughput ($model, batch 128, 1 GPU): mirrored ${ours:-?} samples/s ($how), PyTorch ${theirs:-?} samples/s, ratio $ratio"
else
  note "throughput ($model, batch 128, 1 GPU): mirrored ${ours:-?} samples/s ($how); PyTorch with CUDA not installed"
fi

echo
echo "==== gpu_selftest summary ($("$bin" info | sed -n 's/^  gpu libs  //p'))"
for line in "${summary[@]}"; do echo "  $line"; done
[[ $status -eq 0 ]] && echo "  RESULT: PASS" || echo "  RESULT: FAIL"
exit $status
