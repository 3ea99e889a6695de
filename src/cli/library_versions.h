#pragma once
// Versions of the libraries this binary was built against and runs with, for `mirrored info`
// (the first thing to paste into a bug report).
#include <string>
#include <utility>
#include <vector>

namespace mirrored::cli {

using InfoRows = std::vector<std::pair<std::string, std::string>>;  // label, value

InfoRows build_rows();        // version, build type, sanitizers, compiler
InfoRows library_rows();      // MPI (and its ULFM fault tolerance), HDF5, OpenBLAS, and the CUDA rows when built with CUDA
InfoRows cuda_library_rows(); // CUDA runtime/driver, cuDNN, NCCL; empty without CUDA

}  // namespace mirrored::cli
