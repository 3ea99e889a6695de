// Fused optimizer updates over the flat parameter buffer: one pass reads p, g and the
// state and writes p and the state. Same formulas, in the same float order, as the CPU
// kernels (torch.optim.SGD / Adam / AdamW).
#include <cmath>

#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"

namespace mirrored::kernels::cuda {
namespace {

__global__ void sgd_plain_kernel(float* param, const float* grad, int64_t n, float lr, float wd) {
  MIRRORED_GRID_STRIDE(i, n) param[i] -= lr * (grad[i] + wd * param[i]);
}

__global__ void sgd_momentum_kernel(float* param, const float* grad, float* velocity, int64_t n, float lr,
                                    float momentum, float wd, bool nesterov) {
  MIRRORED_GRID_STRIDE(i, n) {
    const float g = grad[i] + wd * param[i];
    const float v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] -= lr * (nesterov ? g + momentum * v : v);
  }
}

__global__ void adam_kernel(float* param, const float* grad, float* m, float* v, int64_t n, float beta1,
                            float beta2, float eps, float l2, float shrink, float step_size, float sqrt_correction2) {
  MIRRORED_GRID_STRIDE(i, n) {
    const float p = param[i] * shrink;
    const float g = grad[i] + l2 * param[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / sqrt_correction2 + eps;
    param[i] = p - step_size * mi / denom;
  }
}

}  // namespace

void sgd_update(Context& ctx, float* param, const float* grad, float* velocity, int64_t n, const SgdHyper& hyper) {
  if (n == 0) return;
  if (hyper.momentum == 0.0f) {
    sgd_plain_kernel<<<grid_for(n), kThreads, 0, ctx.stream>>>(param, grad, n, hyper.lr, hyper.weight_decay);
    MIRRORED_CUDA_CHECK_LAUNCH("sgd_plain_kernel");
    return;
  }
  sgd_momentum_kernel<<<grid_for(n), kThreads, 0, ctx.stream>>>(param, grad, velocity, n, hyper.lr, hyper.momentum,
                                                                hyper.weight_decay, hyper.nesterov);
  MIRRORED_CUDA_CHECK_LAUNCH("sgd_momentum_kernel");
}

void adam_update(Context& ctx, float* param, const float* grad, float* m, float* v, int64_t n,
                 const AdamHyper& hyper, int64_t step) {
  if (n == 0) return;
  // Bias corrections in double on the host, as on the CPU.
  const double t = static_cast<double>(step);
  const double correction1 = 1.0 - std::pow(static_cast<double>(hyper.beta1), t);
  const double correction2 = 1.0 - std::pow(static_cast<double>(hyper.beta2), t);
  const auto step_size = static_cast<float>(hyper.lr / correction1);
  const auto sqrt_correction2 = static_cast<float>(std::sqrt(correction2));
  const float l2 = hyper.decoupled_weight_decay ? 0.0f : hyper.weight_decay;
  const float shrink = hyper.decoupled_weight_decay ? 1.0f - hyper.lr * hyper.weight_decay : 1.0f;
  adam_kernel<<<grid_for(n), kThreads, 0, ctx.stream>>>(param, grad, m, v, n, hyper.beta1, hyper.beta2, hyper.eps, l2,
                                                        shrink, step_size, sqrt_correction2);
  MIRRORED_CUDA_CHECK_LAUNCH("adam_kernel");
}

}  // namespace mirrored::kernels::cuda
