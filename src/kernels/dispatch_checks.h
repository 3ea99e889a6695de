#pragma once
// What every dispatch_*.cpp file shares: the argument checks and the routing of an op to
// kernels::cuda or kernels::cpu. The checked entry points enforce every shape, dtype and
// device rule once, so that the CPU and CUDA implementations can assume valid arguments.
// Tensors on a GPU go to kernels::cuda (built with MIRRORED_WITH_CUDA), the others to
// kernels::cpu. Private to src/kernels.
#include <initializer_list>

#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

#ifdef MIRRORED_WITH_CUDA
#include "cuda/cuda_kernels.h"
#endif

namespace mirrored::kernels::checks {

// Checks that every tensor exists and that all live on one device; true when it is a GPU.
inline bool on_cuda(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor& first = **tensors.begin();
  for (const Tensor* t : tensors) {
    MIRRORED_CHECK(t->defined(), op, ": undefined tensor");
    MIRRORED_CHECK(t->device() == first.device(), op, ": tensors on ", first.device().str(), " and ",
                   t->device().str());
  }
  return first.device().is_cuda();
}

inline void require_f32(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    MIRRORED_CHECK(t->dtype() == DType::kF32, op, ": expected float32, got ", dtype_name(t->dtype()));
}

inline void require_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  MIRRORED_CHECK(a.shape() == b.shape(), op, ": shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
                 " differ");
}

inline void require_matrix(const char* op, const Tensor& t) {
  MIRRORED_CHECK(t.rank() == 2, op, ": expected a 2-D tensor, got ", shape_str(t.shape()));
}

inline void require_nchw(const char* op, const Tensor& t) {
  MIRRORED_CHECK(t.rank() == 4, op, ": expected an [N, C, H, W] tensor, got ", shape_str(t.shape()));
}

inline void require_vector(const char* op, const Tensor& t, int64_t n, const char* what) {
  MIRRORED_CHECK(t.rank() == 1 && t.dim(0) == n, op, ": ", what, " ", shape_str(t.shape()), ", expected [", n,
                 "]");
}

#ifdef MIRRORED_WITH_CUDA
// The kernel context of the device `t` lives on (makes that device current).
inline cuda::Context& cuda_context(const Tensor& t) { return cuda::context(t.device().index); }
#endif

}  // namespace mirrored::kernels::checks

#ifdef MIRRORED_WITH_CUDA
// Each op runs its CUDA branch as `if (cuda) MIRRORED_ON_CUDA(tensor, fn, args...);`.
#define MIRRORED_ON_CUDA(tensor, fn, ...) return cuda::fn(checks::cuda_context(tensor), __VA_ARGS__)
#else
// Unreachable in practice (a CPU-only build cannot allocate device tensors); kept so that a
// future path that could cannot silently run a CPU kernel on device memory.
#define MIRRORED_ON_CUDA(tensor, fn, ...) \
  throw Error(ExitCode::kUsage, #fn ": this build of mirrored has no CUDA support", true)
#endif
