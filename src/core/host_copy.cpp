#include "mirrored/core/host_copy.h"

#include <cstring>

#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/error.h"

namespace mirrored {

void copy_to_host(const Tensor& tensor, std::vector<float>& into) {
  MIRRORED_CHECK(tensor.dtype() == DType::kF32, "a host copy of a ", dtype_name(tensor.dtype()), " tensor as float32");
  into.resize(static_cast<size_t>(tensor.numel()));
  if (tensor.bytes() == 0) return;
  if (tensor.device().is_cuda()) {
    cuda_copy(into.data(), tensor.raw(), tensor.bytes());
  } else {
    std::memcpy(into.data(), tensor.raw(), tensor.bytes());
  }
}

}  // namespace mirrored
