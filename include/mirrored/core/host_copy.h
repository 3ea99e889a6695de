#pragma once
// A float32 tensor's values copied into a host vector the caller keeps (Tensor::to_vector
// makes a new one). A vector that already has the capacity, such as the last checkpoint's
// buffer, is refilled without allocating: a checkpoint after every step then does not pay
// for the kernel faulting in and zeroing fresh memory as the copy first touches it.
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored {

// `into` is resized to tensor.numel(); a GPU tensor is copied synchronously.
void copy_to_host(const Tensor& tensor, std::vector<float>& into);

}  // namespace mirrored
