#include "mirrored/core/device.h"

#include "mirrored/core/strings.h"

namespace mirrored {

std::string Device::str() const { return is_cpu() ? std::string("cpu") : str_cat("cuda:", index); }

bool cuda_built() {
#ifdef MIRRORED_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace mirrored
