// The architecture list's reading for `mirrored info`'s "cuda archs" row: no GPU needed.
#include <gtest/gtest.h>

#include "mirrored/kernels/cuda_arch.h"

namespace mirrored::kernels {
namespace {

TEST(ArchCoverage, TheDefaultListCoversAmpereAdaHopperAndNewerByPtx) {
  const std::string list = "80-real,90-real,90-virtual";
  EXPECT_EQ(arch_coverage(list, 80), ArchCoverage::kMachineCode);
  EXPECT_EQ(arch_coverage(list, 86), ArchCoverage::kMachineCode);  // sm_80 cubins run on sm_86/89
  EXPECT_EQ(arch_coverage(list, 89), ArchCoverage::kMachineCode);
  EXPECT_EQ(arch_coverage(list, 90), ArchCoverage::kMachineCode);  // H100, H200
  EXPECT_EQ(arch_coverage(list, 100), ArchCoverage::kPtx);        // Blackwell: the sm_90 PTX
  EXPECT_EQ(arch_coverage(list, 75), ArchCoverage::kNone);        // Turing: older than anything built
}

TEST(ArchCoverage, ANativeBuildIsMachineCodeForTheGpuItFound) {
  // What the top-level CMakeLists records for CUDA_ARCH=native on an H200, with CMake's
  // CMAKE_CUDA_ARCHITECTURES_NATIVE ("90-real"), ";" turned into ",".
  EXPECT_EQ(arch_coverage("native: 90-real", 90), ArchCoverage::kMachineCode);
  EXPECT_EQ(arch_coverage("native: 80-real,90-real", 80), ArchCoverage::kMachineCode);
  EXPECT_EQ(arch_coverage("native: 80-real;90-real", 90), ArchCoverage::kMachineCode);
  EXPECT_EQ(arch_coverage("native: 90-real", 100), ArchCoverage::kNone);  // machine code only
  // "native" with nothing recorded says nothing either way (the runtime's probe decides).
  EXPECT_EQ(arch_coverage("native", 90), ArchCoverage::kUnknown);
  EXPECT_EQ(arch_coverage("unknown", 90), ArchCoverage::kUnknown);
}

TEST(ArchCoverage, PlainNumbersAndSpecificTargets) {
  EXPECT_EQ(arch_coverage("90", 90), ArchCoverage::kMachineCode);  // real and virtual
  EXPECT_EQ(arch_coverage("90", 120), ArchCoverage::kPtx);
  EXPECT_EQ(arch_coverage("90a-real", 90), ArchCoverage::kMachineCode);
  EXPECT_EQ(arch_coverage("90a-real", 100), ArchCoverage::kNone);   // "a": that architecture only
  EXPECT_EQ(arch_coverage("90a", 100), ArchCoverage::kNone);        // and its PTX is no use elsewhere
  EXPECT_EQ(arch_coverage("100f-real", 103), ArchCoverage::kMachineCode);  // "f": the family
  EXPECT_EQ(arch_coverage("80-virtual", 90), ArchCoverage::kPtx);
}

}  // namespace
}  // namespace mirrored::kernels
