#pragma once
// The one distributed context: it owns MPI's lifetime, the world communicator, the
// cluster table, this rank's device and, when that is a GPU, the NCCL communicator.
// Nothing else calls MPI_Init or ncclCommInitRank.
#include <memory>
#include <string>

#include "mirrored/comm/communicator.h"
#include "mirrored/comm/watchdog.h"
#include "mirrored/core/device.h"
#include "mirrored/core/error.h"
#include "mirrored/distribute/cluster.h"
#include "mirrored/kernels/device_context.h"

namespace mirrored::distribute {

enum class Launch {
  kAuto,   // MPI when started by mpirun/srun (launcher variables present), else local
  kMpi,
  kLocal,  // a world of one, no MPI
};

enum class DeviceChoice { kAuto, kCpu, kCuda };

struct RuntimeOptions {
  Launch launch = Launch::kAuto;
  DeviceChoice device = DeviceChoice::kCpu;
  bool print_cluster_table = false;
  // A blocking collective that takes longer aborts the job (exit 5), naming the ranks that
  // did not arrive. <= 0: wait forever.
  double collective_timeout_s = 300.0;
};

class Runtime {
 public:
  Runtime(int& argc, char**& argv, RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Host buffers (scalars, strings, loss sums): MPI, or a world of one.
  comm::Communicator& world() { return *world_; }
  // Buffers on device(): NCCL when the device is a GPU, otherwise the world communicator.
  comm::Communicator& device_communicator() { return device_comm_ ? *device_comm_ : *world_; }
  const Cluster& cluster() const { return cluster_; }
  Device device() const { return device_; }
  bool uses_mpi() const { return owns_mpi_; }
  int rank() const { return cluster_.rank(); }
  int world_size() const { return cluster_.world_size(); }
  int mpi_thread_level() const { return thread_level_; }

  // Collective: a communicator over the whole job whose all-reduce goes through one
  // leader per node (comm/hierarchical_communicator.h), watched like world(). Nodes are
  // the shared-memory domains MPI reports; node_color >= 0 groups ranks explicitly
  // (tests). Without MPI, a duplicate of world().
  std::unique_ptr<comm::Communicator> hierarchical_world(int node_color = -1);

  // Ends every rank of the job with `code`: MPI_Abort when MPI is up, exit() otherwise.
  // Safe to call without a Runtime (before or after one existed).
  [[noreturn]] static void abort_job(ExitCode code);

  static bool launched_by_mpi();  // launcher variables (Open MPI, PMIx, PMI, Slurm srun)
  // Before MPI starts: the rank and world size the launcher announced, so errors raised
  // while parsing the command line already say which rank they come from.
  static void identify_from_launcher();

 private:
  bool owns_mpi_ = false;
  int thread_level_ = 0;
  std::unique_ptr<comm::CollectiveWatchdog> watchdog_;
  std::unique_ptr<comm::Communicator> world_;
  // CUDA devices only: the GPU's stream, library handles and plans. Declared between the
  // world and NCCL, so it is destroyed after NCCL (which uses its stream), before MPI goes.
  std::unique_ptr<kernels::DeviceContext> device_context_;
  std::unique_ptr<comm::Communicator> device_comm_;  // NCCL, CUDA devices only
  Cluster cluster_;
  Device device_;
};

}  // namespace mirrored::distribute
