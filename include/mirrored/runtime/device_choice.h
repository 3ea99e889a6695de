#pragma once
// Which CUDA device a rank uses, decided from what the rank can see rather than from the
// launcher: `srun --gpus-per-task=1` (and mpirun ranks on remote nodes that inherit it)
// show each rank one GPU, numbered 0; `mpirun` on a node shows every rank all of them.
// pick_cuda_device is a pure function of its inputs so every launch mode can be tested
// with a fake environment; choose_device applies it to this process.
#include <functional>
#include <string>

#include "mirrored/core/device.h"
#include "mirrored/runtime/cluster.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::runtime {

struct DeviceQuery {
  int local_rank = 0;        // index among the ranks on this host
  int local_size = 1;        // ranks on this host
  int visible = 0;           // CUDA devices this process can see (after CUDA_VISIBLE_DEVICES)
  std::string override_index;  // MIRRORED_CUDA_DEVICE; empty when unset
  std::string visible_list;    // CUDA_VISIBLE_DEVICES as set (for messages); empty when unset
  bool visible_list_set = false;

  // local_rank, local_size and visible as given; the two variables from `getenv`.
  static DeviceQuery from(int local_rank, int local_size, int visible,
                          const std::function<const char*(const char*)>& getenv);
};

struct DevicePick {
  int index = -1;       // the device to use; -1 when there is none
  std::string reason;   // why there is none (index -1), for the caller's message
  bool ok() const { return index >= 0; }
};

// The rules, in order:
//  1. MIRRORED_CUDA_DEVICE=N picks device N; N beyond the visible count is no device.
//     A value that is not a non-negative integer throws InputError (ExitCode::kUsage).
//  2. No visible device: no device.
//  3. One visible device: device 0, whatever the local rank (one GPU per task).
//  4. Otherwise device `local_rank`, when it is visible; else no device.
// Two ranks on one GPU (rule 3 under a plain mpirun on a one-GPU node) is not decided here:
// the runtime compares the physical GPUs of all ranks after the choice
// (src/runtime/device_agreement.h).
DevicePick pick_cuda_device(const DeviceQuery& query);

// This rank's device for `choice`: the CPU for kCpu; for kAuto, the picked GPU or the CPU;
// for kCuda, the picked GPU or an Error (ExitCode::kUsage) that says why there is none.
Device choose_device(DeviceChoice choice, const Cluster& cluster);

}  // namespace mirrored::runtime
