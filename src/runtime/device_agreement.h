#pragma once
// After each rank has chosen its device (choose_device, device_choice.h): the ranks' choices
// checked against each other. Two ranks of one communicator on the same GPU would serialise
// and, under NCCL, fail at init; and a job whose ranks compute on different kinds of device
// would mix communicators.
#include "mirrored/comm/communicator.h"
#include "mirrored/core/device.h"
#include "mirrored/runtime/cluster.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::runtime {

// Collective, for device = auto or cuda. Records every rank's device in `cluster` (whose
// table names the ranks that clash), then: under cuda, two ranks on one GPU are an Error
// (ExitCode::kUsage, alike on every rank); under auto, the job computes on GPUs only when
// every rank has one of its own, and otherwise every rank falls back to the CPU, rank 0
// saying why. Returns this rank's device.
Device agree_on_devices(DeviceChoice choice, Device mine, comm::Communicator& world, Cluster& cluster);

}  // namespace mirrored::runtime
