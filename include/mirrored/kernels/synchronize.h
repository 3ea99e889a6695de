#pragma once
// Waits until the work queued on `device`'s compute stream has finished, so a host clock
// read afterwards times work, not kernel launches. No-op on the CPU (its kernels are
// synchronous).
#include "mirrored/core/device.h"

namespace mirrored::kernels {

void synchronize(Device device);

}  // namespace mirrored::kernels
