#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, build-fuzz/) and runs each one for
# FUZZ_SECONDS (default 20) from the committed seed corpus. Any finding (crash, sanitizer
# report, leak, timeout, out-of-memory) fails the run; the reproducer is left in
# build-fuzz/findings/. New inputs go to a scratch copy, so the committed corpus only
# changes on purpose.
# usage: tests/fuzz/run.sh [target...]     (default: idx hdf5_dataset config safetensors json zip
#        token_file text_corpus; also: hdf5_file)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
source tests/sanitizer_flags.sh
seconds=${FUZZ_SECONDS:-20}
targets=("$@")
((${#targets[@]})) || targets=(idx hdf5_dataset config safetensors json zip token_file text_corpus)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DMIRRORED_CUDA=OFF -DMIRRORED_FUZZ=ON -DMIRRORED_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${SANITIZER_FLAGS[@]}" > build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
rm -f build-fuzz.configure.log
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
mkdir -p build-fuzz/findings
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0"
for target in "${targets[@]}"; do
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-fuzz-$target.XXXXXX")
  echo "== fuzz_$target for $seconds s"
  status=0
  # -timeout: one input may take at most 10 s; -rss_limit_mb: 2 GiB, also the largest
  # single allocation allowed (a reader must not trust sizes from a header).
  build-fuzz/tests/fuzz/fuzz_"$target" "$scratch" "tests/fuzz/corpus/$target" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="build-fuzz/findings/$target-" -print_final_stats=1 \
    > "build-fuzz/fuzz_$target.log" 2>&1 || status=$?
  rm -rf "$scratch"
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "build-fuzz/fuzz_$target.log" | tr '\n' ' '; echo
  if ((status != 0)); then
    tail -60 "build-fuzz/fuzz_$target.log"
    echo "FAIL: fuzz_$target found a problem; reproducer in build-fuzz/findings/" >&2
    exit 1
  fi
done
echo "fuzzing: no findings"
