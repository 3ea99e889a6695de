#pragma once
// CPU implementations of the op set, on raw row-major buffers. Callers (dispatch.cpp) have
// already checked shapes, dtypes and devices; these functions only compute.
#include <cstdint>

#include "mirrored/kernels/kernels.h"

namespace mirrored::kernels::cpu {

// c[m, n] = alpha * op(a) @ op(b) + beta * c, op(a) [m, k], op(b) [k, n]; leading
// dimensions are the row strides of the buffers as stored (before any transpose).
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols);
void accumulate_bias_grad(const float* dy, float* dbias, int64_t rows, int64_t cols);

void relu_forward(const float* x, float* y, int64_t n);
void relu_backward(const float* y, const float* dy, float* dx, int64_t n);

// Labels outside [0, classes) fail a check. `dlogits` may be null.
CrossEntropyResult softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t rows,
                                         int64_t classes, float* dlogits, float grad_scale);

void scale(float* x, int64_t n, float alpha);
void axpy(int64_t n, float alpha, const float* x, float* y);
bool all_finite(const float* x, int64_t n);

void sgd_update(float* param, const float* grad, float* velocity, int64_t n, const SgdHyper& hyper);
void adam_update(float* param, const float* grad, float* m, float* v, int64_t n,
                 const AdamHyper& hyper, int64_t step);

// Threads used by BLAS (and, later, by the element-wise loops).
void set_threads(int threads);
int threads();

}  // namespace mirrored::kernels::cpu
