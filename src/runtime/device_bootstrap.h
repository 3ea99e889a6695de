#pragma once
// A GPU rank's device, started after every rank has agreed on its device
// (device_agreement.h): its context, and the communicator for buffers on it.
#include <memory>

#include "mirrored/comm/communicator.h"
#include "mirrored/kernels/device_context.h"

namespace mirrored::runtime {

// cudaSetDevice(device), then the device's context: its stream, library handles and plan
// caches (kernels/device_context.h). Without CUDA, an Error (kernels::DeviceContext's).
std::unique_ptr<kernels::DeviceContext> start_device_context(int device);

// Collective over `world`. NCCL bootstrapped over it: rank 0's ncclGetUniqueId, an MPI_Bcast
// of its bytes, ncclCommInitRank (comm/nccl_communicator.h; with `survive_failures`, an
// error of a lost peer comes back as comm::PeerFailure). A world of one has nothing to
// exchange: a local communicator, so a NCCL that cannot start in this runtime (a sandbox)
// can only stop jobs of several ranks. Without CUDA, an Error for several ranks.
std::unique_ptr<comm::Communicator> start_device_communicator(comm::Communicator& world, int device,
                                                              double collective_timeout_s, bool survive_failures);

}  // namespace mirrored::runtime
