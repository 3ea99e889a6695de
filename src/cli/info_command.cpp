#include <H5public.h>
#include <mpi.h>

#include <cstdio>

#include "commands.h"
#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/device.h"
#include "mirrored/core/log.h"
#include "mirrored/distribute/gpu_info.h"
#include "mirrored/distribute/runtime.h"

namespace mirrored::cli {

int info_command(int& argc, char**& argv, const Args& /*args*/) {
  distribute::Runtime runtime(argc, argv, {distribute::Launch::kAuto, distribute::DeviceChoice::kAuto, false});
  unsigned h5_major = 0, h5_minor = 0, h5_release = 0;
  H5get_libversion(&h5_major, &h5_minor, &h5_release);
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi_line(mpi_version, static_cast<size_t>(length));
  mpi_line = mpi_line.substr(0, mpi_line.find_first_of(",\n"));

  std::string gpu_reason;
  const int gpus = cuda_device_count(&gpu_reason);
  chief_print(str_cat("mirrored ", MIRRORED_VERSION));
  chief_print(str_cat("  cuda      ", cuda_built() ? "built in" : "not built",
                      cuda_built() ? str_cat(" (", gpus, " GPU(s) visible", gpus ? "" : ": " + gpu_reason, ")") : ""));
  chief_print(str_cat("  gpu libs  ", distribute::cuda_versions_string()));
  chief_print(str_cat("  mpi       ", mpi_line));
  chief_print(str_cat("  hdf5      ", h5_major, ".", h5_minor, ".", h5_release));
  chief_print(str_cat("  launch    ", runtime.uses_mpi() ? "mpi" : "local (one process)", ", ", runtime.world_size(),
                      " rank(s)"));
  chief_print(runtime.cluster().table());
  const std::string gpu_table = distribute::gpus_per_rank(runtime.world());  // collective: every rank
  chief_print("GPUs per rank:\n" + gpu_table);
  return 0;
}

}  // namespace mirrored::cli
