#pragma once
// Device memory primitives used by Storage. Built against the CUDA runtime when the CUDA
// path is compiled in; otherwise each call throws a clear error.
#include <cstddef>
#include <string>

namespace mirrored {

void* cuda_allocate(size_t bytes, int device_index);
void cuda_free(void* ptr) noexcept;
void cuda_memset_zero(void* ptr, size_t bytes);
void cuda_copy(void* dst, const void* src, size_t bytes);  // any direction (unified addressing)

// Number of usable CUDA devices; 0 with `reason` set when there are none or no driver.
int cuda_device_count(std::string* reason);

}  // namespace mirrored
