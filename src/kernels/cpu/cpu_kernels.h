#pragma once
// CPU implementations of the op set, on raw row-major buffers. Callers (dispatch_*.cpp) have
// already checked shapes, dtypes and devices; these functions only compute.
#include <cstdint>
#include <string>
#include <vector>

#include "../shared.h"
#include "mirrored/core/precision.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::kernels::cpu {

// c[m, n] = alpha * op(a) @ op(b) + beta * c, op(a) [m, k], op(b) [k, n]; leading
// dimensions are the row strides of the buffers as stored (before any transpose).
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// The same with `precision`: kBF16 rounds a and b to bfloat16 and accumulates in float32
// (bf16_backends.h chooses how).
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          Precision precision);
// An operand of a bf16 product: float32 values to round first, or bfloat16 bits rounded
// before (kernels::round_to_bf16). Implicit from either pointer, so a call reads as gemm's.
struct Bf16Operand {
  Bf16Operand(const float* values) : f32(values) {}      // NOLINT(google-explicit-constructor)
  Bf16Operand(const uint16_t* rounded) : bf16(rounded) {}  // NOLINT(google-explicit-constructor)
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
};
// gemm with Precision::kBF16 on operands of either kind: the same bits either way.
void gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a,
               int64_t lda, Bf16Operand b, int64_t ldb, float beta, float* c, int64_t ldc);
// y[i] = bfloat16 bits of x[i] rounded to nearest, ties to even (core/bf16.h's float_to_bf16).
void round_to_bf16_bits(const float* x, uint16_t* y, int64_t n);
// Thread-invariant mode (reduction = invariant): every kernel's bits, matrix products and
// convolutions included, are the same at any thread count (blas.cpp).
void set_thread_invariant(bool on);
bool thread_invariant();
// Thread-invariant mode's products as they ran before gemm zeroed c itself for beta = 0
// (blas.cpp, zero_c_here): every 64-column tile asks OpenBLAS for the caller's beta. The
// reference the unit tests hold gemm to, bit for bit.
void gemm_tiles_as_asked(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16).
bool native_bf16();

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

// grad_scale: each gradient's factor (kernels.h, clip_factor), 1 for none.
void sgd_update(float* param, const float* grad, float* velocity, int64_t n, const SgdHyper& hyper,
                float grad_scale);
void adam_update(float* param, const float* grad, float* m, float* v, int64_t n,
                 const AdamHyper& hyper, int64_t step, float grad_scale);

// Floats of workspace conv2d_* need for this shape.
int64_t conv2d_workspace_floats(const ConvShape& s);
// kBF16: x, weight and dy rounded to bfloat16, float32 accumulation and outputs.
void conv2d_forward(const float* x, const float* weight, const float* bias, const ConvShape& s, float* y,
                    float* workspace, Precision precision = Precision::kF32);
// dx may be null (not wanted), dbias too.
void conv2d_backward(const float* x, const float* weight, const float* dy, const ConvShape& s, float* dx,
                     float* dweight, float* dbias, float* workspace, Precision precision = Precision::kF32);

void max_pool2d_forward(const float* x, const PoolShape& s, float* y, int32_t* argmax);
void max_pool2d_backward(const float* dy, const int32_t* argmax, int64_t planes, int64_t in_plane,
                         int64_t out_plane, float* dx);
void avg_pool2d_forward(const float* x, const PoolShape& s, float* y);
void avg_pool2d_backward(const float* dy, const PoolShape& s, float* dx);

// x is [n, c, plane] for the batch-norm kernels.
void batch_norm_sums(const float* x, const float* shift, int64_t n, int64_t c, int64_t plane, float* sums);
void batch_norm_statistics(const float* sums, const float* shift, int64_t c, float eps, float momentum,
                           float* mean, float* invstd, float* running_mean, float* running_var);
void batch_norm_inference_statistics(const float* running_mean, const float* running_var, int64_t c, float eps,
                                     float* mean, float* invstd);
void batch_norm_apply(const float* x, const float* mean, const float* invstd, const float* gamma,
                      const float* beta, int64_t n, int64_t c, int64_t plane, float* y);
void batch_norm_backward_sums(const float* x, const float* dy, const float* mean, const float* invstd, int64_t n,
                              int64_t c, int64_t plane, float* grad_sums);
void batch_norm_backward_input(const float* x, const float* dy, const float* mean, const float* invstd,
                               const float* gamma, const float* grad_sums, int64_t n, int64_t c, int64_t plane,
                               float* dx);

// Batch norm, 2x2 stride-2 max pool and relu over x [n, c, h, w]; the pooled planes are
// [h / 2, w / 2] (an odd last row or column is dropped, as the pool drops it).
struct NormPoolShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t oh() const { return h / 2; }
  int64_t ow() const { return w / 2; }
};
void batch_norm_max_pool_relu_forward(const float* x, const float* mean, const float* invstd, const float* gamma,
                                      const float* beta, const NormPoolShape& s, float* y, int32_t* argmax);
void batch_norm_max_pool_relu_backward_sums(const float* x, const float* y, const float* dy, const int32_t* argmax,
                                            const float* mean, const float* invstd, const NormPoolShape& s,
                                            float* grad_sums);
void batch_norm_max_pool_relu_backward_input(const float* x, const float* y, const float* dy, const int32_t* argmax,
                                             const float* mean, const float* invstd, const float* gamma,
                                             const float* grad_sums, const NormPoolShape& s, float* dx);

void dropout_forward(const float* x, float p, uint64_t seed, int64_t first_sample, int64_t n,
                     int64_t sample_numel, float* mask, float* y);
void multiply(const float* a, const float* b, float* y, int64_t n);
void add(const float* a, const float* b, float* y, int64_t n);

// Threads used by the matrix products (OpenBLAS) and, in builds with oneDNN, by the
// convolutions (OpenMP). The element-wise, pooling and batch-norm loops stay on the calling
// thread: they are bound by memory bandwidth, which one core of a rank already saturates
// when every core runs a rank.
void set_threads(int threads);
int threads();
std::string blas_core();
// The OpenBLAS kernel set to re-execute with ("" to keep OpenBLAS's): kernels.h,
// cpu_blas_core_to_switch_to.
std::string blas_core_to_switch_to();

// ---- Transformer (kernels.h, "Transformer"). rows = B * T; x-like buffers are [rows, c].
// Token ids outside [0, vocab) fail a check.
void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, int64_t batch, int64_t tokens_per_row,
                       int64_t vocab, int64_t c, float* out);
void embedding_backward(const int32_t* tokens, const float* dout, int64_t batch, int64_t tokens_per_row, int64_t vocab,
                        int64_t c, float* dwte, float* dwpe);
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float eps, int64_t rows, int64_t c,
                        float* y, float* mean, float* rstd);
// sum = a + b, y = layer_norm(sum): the bits of add() then layer_norm_forward().
void add_layer_norm_forward(const float* a, const float* b, const float* gamma, const float* beta, float eps,
                            int64_t rows, int64_t c, float* sum, float* y, float* mean, float* rstd);
// dresidual: null, or [rows, c] added to dx (the bits of add() after the plain backward).
void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                         const float* dresidual, int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta);
void gelu_forward(const float* x, float* y, int64_t n);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n);
// h [rows, cols] += bias, th = tanh(u(h)), y = gelu(h); backward: dx = dy * gelu'(x) from
// th, dbias += dx's column sums (rows in order); bias_gelu.cpp.
void bias_gelu_forward(float* h, const float* bias, int64_t rows, int64_t cols, float* th, float* y);
void bias_gelu_backward(const float* x, const float* th, const float* dy, int64_t rows, int64_t cols, float* dx,
                        float* dbias);
// The same with y (forward) or dx (backward) rounded to bfloat16 as formed (the bits of the
// float32 kernel, then round_to_bf16_bits; rounded_blocks.h), for bf16 products that take
// them as operands.
void bias_gelu_forward_bf16(float* h, const float* bias, int64_t rows, int64_t cols, float* th, uint16_t* y);
void bias_gelu_backward_bf16(const float* x, const float* th, const float* dy, int64_t rows, int64_t cols,
                             uint16_t* dx, float* dbias);
// qkv [b, t, 3c], out [b, t, c], probs [b, heads, t, t]; backward's `dscores` is [t, t] of scratch.
void attention_forward(const float* qkv, int64_t b, int64_t t, int64_t c, int64_t heads, float* out, float* probs);
void attention_backward(const float* qkv, const float* probs, const float* dout, int64_t b, int64_t t, int64_t c,
                        int64_t heads, float* dqkv, float* dscores);
// Fused: lse [b, heads, t]; fused_attention.cpp.
void fused_attention_forward(const float* qkv, int64_t b, int64_t t, int64_t c, int64_t heads, float* out, float* lse);
void fused_attention_backward(const float* qkv, const float* out, const float* lse, const float* dout, int64_t b,
                              int64_t t, int64_t c, int64_t heads, float* dqkv);

// Per-step statistics kept beside the parameters (kernels.h: tally_non_finite, sum_squares,
// scale_by_clip, clip_factor); step_stats.cpp.
void tally_non_finite(int32_t* flag, int32_t* tally, int32_t step, bool latch);
double sum_squares(const float* x, int64_t n);
void scale_by_clip(float* x, int64_t n, float sum_squares, float max_norm, float* norm);
void clip_factor(float sum_squares, float max_norm, float* norm, float* factor);

// Exact sums' grid conversions (kernels.h, "exact_grid_*"); exact_grid.cpp.
void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          int32_t* exponents);
// The same, starting segment s from known_largest[s] (magnitude bits of terms scanned before).
void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          const uint32_t* known_largest, int32_t* exponents);
void exact_grid_largest(const float* x, const std::vector<size_t>& offsets, uint32_t* largest);
void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums);
// The same, then each of `spent` (buffers among the terms) +0 at every value.
void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums, const std::vector<float*>& spent);
void exact_grid_plain_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                           const int32_t* exponents, float* plain);
void exact_grid_round(const int64_t* sums, const float* plain, const std::vector<size_t>& offsets,
                      const int32_t* exponents, int64_t total_terms, float* out);

}  // namespace mirrored::kernels::cpu
