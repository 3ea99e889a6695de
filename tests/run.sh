#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, imports the data set and runs
# every test through CTest. CI runs exactly this.
#   tests/run.sh            Release build in build/, full suite
#   tests/run.sh -L unit    extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install_deps.sh --test
launch/build.sh build
launch/import_fmnist.sh build/mirrored
cd build
ctest --output-on-failure --timeout 600 "$@"
