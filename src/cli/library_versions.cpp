#include "library_versions.h"

#include "mirrored/data/tokenizer.h"

#include <H5public.h>
#include <mpi.h>

#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/core/strings.h"
#include "mirrored/kernels/kernels.h"

// OpenBLAS' own description of itself (version, target CPU, threading); declared here so
// the CLI needs no cblas.h include path. The build selects OpenBLAS (BLA_VENDOR).
extern "C" char* openblas_get_config(void);

#ifndef MIRRORED_BUILD_TYPE
#define MIRRORED_BUILD_TYPE "unknown"
#endif
#ifndef MIRRORED_SANITIZERS
#define MIRRORED_SANITIZERS ""
#endif

#if defined(__clang__)
#define MIRRORED_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define MIRRORED_COMPILER "gcc " __VERSION__
#else
#define MIRRORED_COMPILER "unknown"
#endif

namespace mirrored::cli {

InfoRows build_rows() {
  const std::string sanitizers = MIRRORED_SANITIZERS;
  return {{"version", MIRRORED_VERSION},
          {"build", MIRRORED_BUILD_TYPE},
          {"sanitizers", sanitizers.empty() ? "none" : sanitizers},
          {"compiler", MIRRORED_COMPILER}};
}

InfoRows library_rows() {
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi_line(mpi_version, static_cast<size_t>(length));
  mpi_line = mpi_line.substr(0, mpi_line.find_first_of(",\n"));
  int mpi_major = 0, mpi_minor = 0;
  MPI_Get_version(&mpi_major, &mpi_minor);

  unsigned h5_major = 0, h5_minor = 0, h5_release = 0;
  H5get_libversion(&h5_major, &h5_minor, &h5_release);

  InfoRows rows = {{"mpi", str_cat(mpi_line, " (MPI ", mpi_major, ".", mpi_minor, ")")},
                   {"ulfm", comm::fault_tolerance().describe()},
                   {"hdf5", str_cat(h5_major, ".", h5_minor, ".", h5_release, " (built with ", H5_VERS_MAJOR, ".",
                                    H5_VERS_MINOR, ".", H5_VERS_RELEASE, ")")},
                   {"blas", openblas_get_config()}};
  const std::string onednn = kernels::cpu_onednn_version();
  rows.push_back({"onednn", onednn.empty() ? "not built" : str_cat(onednn, ", CPU convolutions")});
  rows.push_back({"sentencepiece", data::Tokenizer::has_sentencepiece() ? "built, subword tokenizers"
                                                                        : "not built (byte tokens only)"});
  for (auto& row : cuda_library_rows()) rows.push_back(std::move(row));
  return rows;
}

}  // namespace mirrored::cli
