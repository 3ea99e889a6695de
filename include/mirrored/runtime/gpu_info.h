#pragma once
// What `mirrored info` says about GPUs: library versions and the GPUs each rank sees.
#include <string>

#include "mirrored/comm/communicator.h"

namespace mirrored::runtime {

// "CUDA runtime 13.0, driver 12.8, cuDNN 9.19.0, NCCL 2.28.9", or why not ("not built",
// "driver: none (cudaErrorInsufficientDriver ...)").
std::string cuda_versions_string();

// This process's visible GPUs: "2: cuda:0 NVIDIA H200 (139 GiB, sm_90), cuda:1 ...", or
// "none (reason)".
std::string local_gpus_string();

// Collective over `world`: one line per rank with its host and its GPUs, for rank 0 to print.
std::string gpus_per_rank(comm::Communicator& world);

}  // namespace mirrored::runtime
