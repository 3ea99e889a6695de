#pragma once
// Marks an inline function that host code and CUDA kernels both call, so a formula (an
// optimizer update, a rounding rule, a random stream) is written once and gives the same
// bits on either side.
#if defined(__CUDACC__)
#define MIRRORED_HOST_DEVICE __host__ __device__
#else
#define MIRRORED_HOST_DEVICE
#endif
