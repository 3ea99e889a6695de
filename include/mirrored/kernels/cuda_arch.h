#pragma once
// Whether this build's GPU kernels run on a GPU of a given compute capability: read from the
// architecture list the build recorded (CMake's CUDA_ARCHITECTURES, "native: 90-real" for a
// native build), and asked of the CUDA runtime itself, which loads a kernel for the device.
// `mirrored info` reports both; only the runtime's answer can say "no kernel image".
#include <string>

namespace mirrored::kernels {

enum class ArchCoverage {
  kMachineCode,  // a cubin for this architecture family, minor version <= the GPU's
  kPtx,          // only PTX of a lower or equal version: the driver compiles it at start-up
  kNone,         // neither: every kernel launch would fail
  kUnknown,      // the list names no architecture ("native" without what it found)
};

// What `built` ("80-real,90-real,90-virtual", "native: 90-real", ";" or "," separated)
// gives a GPU of compute capability `cc` (major * 10 + minor, e.g. 90).
ArchCoverage arch_coverage(const std::string& built, int cc);

struct KernelImage {
  bool loads = false;     // the runtime found code for the device (machine code or PTX)
  int binary_version = 0;  // cudaFuncAttributes::binaryVersion (major * 10 + minor)
  int ptx_version = 0;     // cudaFuncAttributes::ptxVersion
  std::string error;       // the runtime's text when it does not load
};

// Asks the runtime to load one of this build's kernels for `device` (CUDA builds only; the
// current device is restored). Same compile flags as every kernel, so the answer holds for all.
KernelImage kernel_image_for(int device);

}  // namespace mirrored::kernels
