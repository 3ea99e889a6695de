#pragma once
// Device memory primitives used by Storage. Built against the CUDA runtime when the CUDA
// path is compiled in; otherwise each call throws a clear error.
#include <cstddef>
#include <string>

namespace mirrored {

void* cuda_allocate(size_t bytes, int device_index);
void cuda_free(void* ptr) noexcept;
// Zeroes device memory of `device`, asynchronously on its compute stream
// (core/cuda_resources.h): ordered with the kernels, no host wait.
void cuda_memset_zero(void* ptr, size_t bytes, int device);
// Copies between device buffers of `device`, asynchronously on its compute stream.
void cuda_copy_on_device(void* dst, const void* src, size_t bytes, int device);
// Any direction (unified addressing), synchronous: the host may read `dst` on return.
void cuda_copy(void* dst, const void* src, size_t bytes);

// Number of usable CUDA devices; 0 with `reason` set when there are none or no driver.
int cuda_device_count(std::string* reason);

}  // namespace mirrored
