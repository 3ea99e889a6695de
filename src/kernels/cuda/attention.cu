// Causal self-attention on the GPU: per sequence, the products run as cuBLAS strided-batched
// GEMMs over the heads, reading q, k and v in place inside qkv [B, T, 3C] (head h starts
// h * C/H floats into each row, rows 3C apart), so nothing is permuted; the causal softmax
// and its backward are fused row kernels, one warp per row. All on the compute stream.
#include <cmath>

#include "cublas_check.h"
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"

namespace mirrored::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;

__device__ float warp_sum(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ float warp_max(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// Rows of [rows, t_len] score matrices; row r is query position r % t_len. In place:
// p = softmax over j <= t of the scores, zero above the diagonal.
__global__ void causal_softmax_kernel(float* p, int64_t rows, int64_t t_len) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const int64_t t = r % t_len;
  float* row = p + r * t_len;
  float max = -INFINITY;
  for (int64_t j = lane; j <= t; j += kWarp) max = fmaxf(max, row[j]);
  max = warp_max(max);
  float sum = 0.0f;
  for (int64_t j = lane; j <= t; j += kWarp) {
    const float e = expf(row[j] - max);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t j = lane; j < t_len; j += kWarp) row[j] = j <= t ? row[j] * inv : 0.0f;
}

// ds = p * (dp - sum_j p dp), in place in dp; zero above the diagonal.
__global__ void causal_softmax_backward_kernel(const float* p, float* dp, int64_t rows, int64_t t_len) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const int64_t t = r % t_len;
  const float* prow = p + r * t_len;
  float* row = dp + r * t_len;
  float dot = 0.0f;
  for (int64_t j = lane; j <= t; j += kWarp) dot += prow[j] * row[j];
  dot = warp_sum(dot);
  for (int64_t j = lane; j < t_len; j += kWarp) row[j] = j <= t ? prow[j] * (row[j] - dot) : 0.0f;
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

int as_int(int64_t value) {
  MIRRORED_CHECK(value >= 0 && value <= INT32_MAX, "attention dimension ", value, " exceeds cuBLAS's int");
  return static_cast<int>(value);
}

// Row-major c_i = alpha op(a_i) op(b_i) + beta c_i for `batch` matrices spaced by the
// strides, the transposed column-major call as in gemm (context.cpp).
void batched_gemm(Context& ctx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                  float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  MIRRORED_CUBLAS_CHECK(cublasSgemmStridedBatched(
      ctx.cublas(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(n),
      as_int(m), as_int(k), &alpha, b, as_int(ldb), stride_b, a, as_int(lda), stride_a, &beta, c, as_int(ldc),
      stride_c, as_int(batch)));
}

}  // namespace

void attention_forward(Context& ctx, const float* qkv, int64_t b_len, int64_t t_len, int64_t c, int64_t heads,
                       float* out, float* probs) {
  if (b_len * t_len == 0) return;
  const int64_t hs = c / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int64_t b = 0; b < b_len; ++b) {
    const float* q = qkv + b * t_len * 3 * c;
    float* p = probs + b * heads * t_len * t_len;
    batched_gemm(ctx, false, true, t_len, t_len, hs, scale, q, 3 * c, hs, q + c, 3 * c, hs, 0.0f, p, t_len,
                 t_len * t_len, heads);  // q k^T / sqrt(hs), every head
  }
  causal_softmax_kernel<<<row_blocks(b_len * heads * t_len), kThreads, 0, ctx.stream()>>>(probs, b_len * heads * t_len,
                                                                                         t_len);
  MIRRORED_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
  for (int64_t b = 0; b < b_len; ++b) {
    const float* v = qkv + b * t_len * 3 * c + 2 * c;
    batched_gemm(ctx, false, false, t_len, hs, t_len, 1.0f, probs + b * heads * t_len * t_len, t_len, t_len * t_len, v,
                 3 * c, hs, 0.0f, out + b * t_len * c, c, hs, heads);  // p v
  }
}

int64_t attention_backward_workspace_floats(int64_t t_len, int64_t heads) { return heads * t_len * t_len; }

void attention_backward(Context& ctx, const float* qkv, const float* probs, const float* dout, int64_t b_len,
                        int64_t t_len, int64_t c, int64_t heads, float* dqkv, float* workspace) {
  if (b_len * t_len == 0) return;
  const int64_t hs = c / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int64_t tt = t_len * t_len;
  // One sequence at a time, so the score gradients need [H, T, T] and not [B, H, T, T].
  for (int64_t b = 0; b < b_len; ++b) {
    const float* q = qkv + b * t_len * 3 * c;
    const float* k = q + c;
    const float* v = q + 2 * c;
    float* dq = dqkv + b * t_len * 3 * c;
    float* dk = dq + c;
    float* dv = dq + 2 * c;
    const float* p = probs + b * heads * tt;
    const float* dy = dout + b * t_len * c;
    batched_gemm(ctx, false, true, t_len, t_len, hs, 1.0f, dy, c, hs, v, 3 * c, hs, 0.0f, workspace, t_len, tt,
                 heads);  // dp = dy v^T
    batched_gemm(ctx, true, false, t_len, hs, t_len, 1.0f, p, t_len, tt, dy, c, hs, 0.0f, dv, 3 * c, hs,
                 heads);  // dv = p^T dy
    causal_softmax_backward_kernel<<<row_blocks(heads * t_len), kThreads, 0, ctx.stream()>>>(p, workspace,
                                                                                           heads * t_len, t_len);
    MIRRORED_CUDA_CHECK_LAUNCH("causal_softmax_backward_kernel");
    batched_gemm(ctx, false, false, t_len, hs, t_len, scale, workspace, t_len, tt, k, 3 * c, hs, 0.0f, dq, 3 * c, hs,
                 heads);  // dq = ds k / sqrt(hs)
    batched_gemm(ctx, true, false, t_len, hs, t_len, scale, workspace, t_len, tt, q, 3 * c, hs, 0.0f, dk, 3 * c, hs,
                 heads);  // dk = ds^T q / sqrt(hs)
  }
}

}  // namespace mirrored::kernels::cuda
