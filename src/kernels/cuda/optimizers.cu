// Fused optimizer updates over the flat parameter buffer: one pass reads p, g and the
// state and writes p and the state. The per-element formulas are in
// kernels/optimizer_math.h, the same functions the CPU loops call.
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"
#include "mirrored/kernels/optimizer_math.h"

namespace mirrored::kernels::cuda {
namespace {

// A set skip flag (the gradients held a NaN or an infinity) makes every kernel a no-op.
__device__ bool skipped(const int32_t* skip) { return skip != nullptr && *skip != 0; }
// The factor each gradient is multiplied by as it is read (the clip's), 1 without one.
__device__ float factor_of(const float* scale) { return scale != nullptr ? *scale : 1.0f; }

__global__ void sgd_plain_kernel(float* param, const float* grad, int64_t n, float lr, float wd, const int32_t* skip,
                                 const float* scale) {
  if (skipped(skip)) return;
  const float f = factor_of(scale);
  MIRRORED_GRID_STRIDE(i, n) param[i] = sgd_plain_step(param[i], scaled_gradient(grad[i], f), lr, wd);
}

__global__ void sgd_momentum_kernel(float* param, const float* grad, float* velocity, int64_t n, float lr,
                                    float momentum, float wd, bool nesterov, const int32_t* skip,
                                    const float* scale) {
  if (skipped(skip)) return;
  const float f = factor_of(scale);
  MIRRORED_GRID_STRIDE(i, n) {
    param[i] = sgd_momentum_step(param[i], scaled_gradient(grad[i], f), velocity[i], lr, momentum, wd, nesterov);
  }
}

__global__ void adam_kernel(float* param, const float* grad, float* m, float* v, int64_t n, AdamStep s,
                            const int32_t* skip, const float* scale) {
  if (skipped(skip)) return;
  const float f = factor_of(scale);
  MIRRORED_GRID_STRIDE(i, n) param[i] = adam_element_step(param[i], scaled_gradient(grad[i], f), m[i], v[i], s);
}

}  // namespace

void sgd_update(Context& ctx, float* param, const float* grad, float* velocity, int64_t n, const SgdHyper& hyper,
                const int32_t* skip, const float* scale) {
  if (n == 0) return;
  if (hyper.momentum == 0.0f) {
    sgd_plain_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(param, grad, n, hyper.lr, hyper.weight_decay, skip,
                                                                  scale);
    MIRRORED_CUDA_CHECK_LAUNCH("sgd_plain_kernel");
    return;
  }
  sgd_momentum_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(param, grad, velocity, n, hyper.lr, hyper.momentum,
                                                                hyper.weight_decay, hyper.nesterov, skip, scale);
  MIRRORED_CUDA_CHECK_LAUNCH("sgd_momentum_kernel");
}

void adam_update(Context& ctx, float* param, const float* grad, float* m, float* v, int64_t n,
                 const AdamHyper& hyper, int64_t step, const int32_t* skip, const float* scale) {
  if (n == 0) return;
  adam_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(param, grad, m, v, n, adam_step(hyper, step), skip, scale);
  MIRRORED_CUDA_CHECK_LAUNCH("adam_kernel");
}

}  // namespace mirrored::kernels::cuda
