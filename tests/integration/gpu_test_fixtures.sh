#!/usr/bin/env bash
# Every test that touches a CUDA device uses a GPU fixture (tests/unit/devices.h), so on a
# GPU it has a device context and launch/gpu_selftest.sh selects it: the repository's unit
# and MPI tests pass tests/tools/gpu_tests.py's check, and the check fails, naming file and
# line, on the mistakes it exists for (a GPU tensor in a plain TEST, a fixture of its own,
# an instantiation over kTestDevices) while CPU-only checks stay allowed. The filter the
# self-test runs names the GPU fixtures and none of the CPU suites.
source "$(dirname "$0")/lib.sh"
src=${SOURCE_DIR:?SOURCE_DIR must point at the source tree}
tool=$src/tests/tools/gpu_tests.py
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }

out=$(python3 "$tool" check "$src/tests/unit" "$src/tests/mpi") || { echo "$out"; fail "the repository's tests fail the fixture check"; }
echo "ok: $out"

mkdir -p "$WORK/bad" "$WORK/good"
cat >"$WORK/bad/test_bad.cpp" <<'CPP'
#include "devices.h"
namespace mirrored {
class Mine : public ::testing::Test {};
class OnDevices : public ::testing::TestWithParam<Device> {};
TEST(Plain, GpuTensorWithoutAContext) {
  MIRRORED_SKIP_WITHOUT_CUDA();
  Tensor t({4}, DType::kF32, Device::cuda(0));
}
TEST_F(Mine, OwnFixture) {
  if (!testing::cuda_present()) GTEST_SKIP() << "no GPU";
  Tensor t({4}, DType::kF32, Device::cuda(0));
}
TEST_P(OnDevices, Param) { Tensor t({4}, DType::kF32, GetParam()); }
INSTANTIATE_TEST_SUITE_P(Devices, OnDevices, ::testing::ValuesIn(testing::kTestDevices));
}  // namespace mirrored
CPP
cat >"$WORK/good/test_good.cpp" <<'CPP'
#include "devices.h"
namespace mirrored {
class OnGpu : public testing::CudaTest {};
class Derived : public OnGpu {};
TEST_F(Derived, GpuTensor) { Tensor t({4}, DType::kF32, Device::cuda(0)); }
TEST(Cpu, NeedsNoGpu) {
  if (testing::cuda_present()) GTEST_SKIP() << "a GPU is present";
  // Device::cuda(0) in a comment, and "Device::cuda(0)" in a string, touch nothing.
  EXPECT_EQ(std::string("Device::cuda(0)").size(), 15u);
}
#ifdef MIRRORED_WITH_CUDA
#else
TEST(Cpu, NeedsTheCudaBuild) { EXPECT_THROW(kernels::DeviceContext(0), Error); }
#endif
}  // namespace mirrored
CPP
status=0
python3 "$tool" check "$WORK/bad" >"$WORK/bad.out" 2>&1 || status=$?
cat "$WORK/bad.out"
[[ $status -eq 1 ]] || fail "the check exited $status on tests that touch a GPU outside the fixtures (expected 1)"
for expected in "test_bad.cpp:5: Plain.GpuTensorWithoutAContext" "test_bad.cpp:9: Mine.OwnFixture" \
                "test_bad.cpp:14: Devices/OnDevices is instantiated over kTestDevices" "3 test(s) touch a CUDA device"; do
  grep -qF "$expected" "$WORK/bad.out" || fail "the check did not report '$expected'"
done
echo "ok: the check fails on a plain TEST, a fixture of its own and an instantiation over kTestDevices"
python3 "$tool" check "$WORK/good" >"$WORK/good.out" 2>&1 || { cat "$WORK/good.out"; fail "the check refused derived GPU fixtures or CPU-only checks"; }
echo "ok: derived GPU fixtures, CPU-only checks, comments, strings and #else branches pass"

filter=$(python3 "$tool" filter "$src/tests/unit" --count 2>"$WORK/count")
for suite in TransformerCpuGpu.* TokenDatasetOnGpu.* DeviceContextOnGpu.* Cudnn.* '*/KernelsOn.*'; do
  [[ ":$filter:" == *":$suite:"* ]] || fail "the GPU filter lacks $suite: $filter"
done
for suite in TokenDatasetTest DeviceContext. Config. '*/GemmTest'; do
  [[ "$filter" != *"$suite"* ]] || fail "the GPU filter selects the CPU suite $suite: $filter"
done
[[ $(cat "$WORK/count") -gt 50 ]] || fail "the GPU filter counts $(cat "$WORK/count") tests"
[[ $(python3 "$tool" filter "$src/tests/mpi") == "Nccl.*" ]] || fail "the MPI GPU filter is not Nccl.*"
echo "ok: the self-test's filter: $(cat "$WORK/count") unit tests in $(tr ':' '\n' <<<"$filter" | wc -l) GPU fixtures; MPI: Nccl.*"
