// CUDA kernels of the transformer's token-wise ops: embeddings, layer norm, GELU. Row
// reductions use one warp per row; column reductions (the gradients of shared parameters)
// run in fixed-order chunks, never atomics, so every result repeats bit for bit.
#include <algorithm>
#include <cmath>

#include "mirrored/kernels/transformer_math.h"
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"

namespace mirrored::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;  // one warp per row
// The embedding gradient: blocks each own a range of vocabulary rows and scan every token.
constexpr unsigned kEmbeddingBlocks = 256;
constexpr int kTokenTile = 1024;
// Layer norm's dgamma/dbeta: rows summed in this many chunks, then the chunks in order.
constexpr int64_t kLayerNormChunks = 64;

__device__ float warp_sum(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__global__ void embedding_forward_kernel(const int32_t* tokens, const float* wte, const float* wpe, int64_t n_tokens,
                                         int64_t tokens_per_row, int64_t vocab, int64_t c, float* out) {
  MIRRORED_GRID_STRIDE(i, n_tokens * c) {
    const int64_t n = i / c, j = i % c;
    const int32_t token = tokens[n];
    out[i] = token >= 0 && token < vocab ? wte[token * c + j] + wpe[(n % tokens_per_row) * c + j] : NAN;
  }
}

// Block k owns vocabulary rows [k * rows_per_block, (k+1) * rows_per_block): it reads every
// token in order (a tile at a time, through shared memory) and adds the gradient rows of
// the ones it owns, a thread per channel. A token's branch is uniform across the block.
__global__ void embedding_backward_wte_kernel(const int32_t* tokens, const float* dout, int64_t n_tokens,
                                              int64_t vocab, int64_t c, int64_t rows_per_block, float* dwte) {
  __shared__ int32_t tile[kTokenTile];
  const int64_t first = blockIdx.x * rows_per_block;
  const int64_t last = min(first + rows_per_block, vocab);
  for (int64_t start = 0; start < n_tokens; start += kTokenTile) {
    const int64_t count = min(int64_t{kTokenTile}, n_tokens - start);
    __syncthreads();
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) tile[j] = tokens[start + j];
    __syncthreads();
    for (int64_t j = 0; j < count; ++j) {
      const int32_t token = tile[j];
      if (token < first || token >= last) continue;
      const float* row = dout + (start + j) * c;
      float* grad = dwte + token * c;
      for (int64_t ch = threadIdx.x; ch < c; ch += blockDim.x) grad[ch] += row[ch];
    }
  }
}

__global__ void embedding_backward_wpe_kernel(const float* dout, int64_t batch, int64_t tokens_per_row, int64_t c,
                                              float* dwpe) {
  MIRRORED_GRID_STRIDE(i, tokens_per_row * c) {
    float acc = dwpe[i];
    for (int64_t b = 0; b < batch; ++b) acc += dout[b * tokens_per_row * c + i];
    dwpe[i] = acc;
  }
}

__global__ void layer_norm_forward_kernel(const float* x, const float* gamma, const float* beta, float eps,
                                          int64_t rows, int64_t c, float* y, float* mean, float* rstd) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const float* row = x + r * c;
  float sum = 0.0f;
  for (int64_t j = lane; j < c; j += kWarp) sum += row[j];
  const float m = warp_sum(sum) / static_cast<float>(c);
  float sq = 0.0f;
  for (int64_t j = lane; j < c; j += kWarp) {
    const float d = row[j] - m;
    sq += d * d;
  }
  const float s = rsqrtf(warp_sum(sq) / static_cast<float>(c) + eps);
  float* out = y + r * c;
  for (int64_t j = lane; j < c; j += kWarp) out[j] = (row[j] - m) * s * gamma[j] + beta[j];
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

__global__ void layer_norm_backward_input_kernel(const float* x, const float* dy, const float* gamma,
                                                 const float* mean, const float* rstd, int64_t rows, int64_t c,
                                                 float* dx) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const float* xr = x + r * c;
  const float* g = dy + r * c;
  const float m = mean[r], s = rstd[r];
  float sum_dg = 0.0f, sum_dg_xhat = 0.0f;
  for (int64_t j = lane; j < c; j += kWarp) {
    const float dg = g[j] * gamma[j];
    sum_dg += dg;
    sum_dg_xhat += dg * (xr[j] - m) * s;
  }
  const float mean_dg = warp_sum(sum_dg) / static_cast<float>(c);
  const float mean_dg_xhat = warp_sum(sum_dg_xhat) / static_cast<float>(c);
  float* out = dx + r * c;
  for (int64_t j = lane; j < c; j += kWarp) out[j] = s * (g[j] * gamma[j] - mean_dg - (xr[j] - m) * s * mean_dg_xhat);
}

// partial[chunk] = {sum dy xhat, sum dy} over the chunk's rows, a thread per column.
__global__ void layer_norm_param_partials_kernel(const float* x, const float* dy, const float* mean,
                                                 const float* rstd, int64_t rows, int64_t c, int64_t rows_per_chunk,
                                                 float* partial) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= c) return;
  const int64_t chunk = blockIdx.y;
  const int64_t end = min(rows, (chunk + 1) * rows_per_chunk);
  float sum_dg = 0.0f, sum_d = 0.0f;
  for (int64_t r = chunk * rows_per_chunk; r < end; ++r) {
    const float g = dy[r * c + j];
    sum_dg += g * (x[r * c + j] - mean[r]) * rstd[r];
    sum_d += g;
  }
  partial[(2 * chunk) * c + j] = sum_dg;
  partial[(2 * chunk + 1) * c + j] = sum_d;
}

__global__ void layer_norm_param_grads_kernel(const float* partial, int64_t chunks, int64_t c, float* dgamma,
                                              float* dbeta) {
  MIRRORED_GRID_STRIDE(j, c) {
    float sum_dg = 0.0f, sum_d = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {
      sum_dg += partial[(2 * k) * c + j];
      sum_d += partial[(2 * k + 1) * c + j];
    }
    dgamma[j] += sum_dg;
    dbeta[j] += sum_d;
  }
}

__global__ void gelu_forward_kernel(const float* x, float* y, int64_t n) {
  MIRRORED_GRID_STRIDE(i, n) y[i] = gelu(x[i]);
}

__global__ void gelu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  MIRRORED_GRID_STRIDE(i, n) dx[i] = dy[i] * gelu_derivative(x[i]);
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

}  // namespace

void embedding_forward(Context& ctx, const int32_t* tokens, const float* wte, const float* wpe, int64_t batch,
                       int64_t tokens_per_row, int64_t vocab, int64_t c, float* out) {
  const int64_t n = batch * tokens_per_row;
  if (n * c == 0) return;
  embedding_forward_kernel<<<grid_for(n * c), kThreads, 0, ctx.stream()>>>(tokens, wte, wpe, n, tokens_per_row, vocab,
                                                                         c, out);
  MIRRORED_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

void embedding_backward(Context& ctx, const int32_t* tokens, const float* dout, int64_t batch,
                        int64_t tokens_per_row, int64_t vocab, int64_t c, float* dwte, float* dwpe) {
  const int64_t n = batch * tokens_per_row;
  if (n * c == 0) return;
  const int64_t rows_per_block = (vocab + kEmbeddingBlocks - 1) / kEmbeddingBlocks;
  const unsigned blocks = static_cast<unsigned>((vocab + rows_per_block - 1) / rows_per_block);
  embedding_backward_wte_kernel<<<blocks, kThreads, 0, ctx.stream()>>>(tokens, dout, n, vocab, c, rows_per_block, dwte);
  MIRRORED_CUDA_CHECK_LAUNCH("embedding_backward_wte_kernel");
  embedding_backward_wpe_kernel<<<grid_for(tokens_per_row * c), kThreads, 0, ctx.stream()>>>(dout, batch,
                                                                                           tokens_per_row, c, dwpe);
  MIRRORED_CUDA_CHECK_LAUNCH("embedding_backward_wpe_kernel");
}

void layer_norm_forward(Context& ctx, const float* x, const float* gamma, const float* beta, float eps, int64_t rows,
                        int64_t c, float* y, float* mean, float* rstd) {
  if (rows == 0) return;
  layer_norm_forward_kernel<<<row_blocks(rows), kThreads, 0, ctx.stream()>>>(x, gamma, beta, eps, rows, c, y, mean,
                                                                           rstd);
  MIRRORED_CUDA_CHECK_LAUNCH("layer_norm_forward_kernel");
}

int64_t layer_norm_backward_workspace_floats(int64_t rows, int64_t c) {
  return 2 * std::min(rows, kLayerNormChunks) * c;
}

void layer_norm_backward(Context& ctx, const float* x, const float* dy, const float* gamma, const float* mean,
                         const float* rstd, int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta,
                         float* workspace) {
  if (rows == 0) return;
  layer_norm_backward_input_kernel<<<row_blocks(rows), kThreads, 0, ctx.stream()>>>(x, dy, gamma, mean, rstd, rows, c,
                                                                                  dx);
  MIRRORED_CUDA_CHECK_LAUNCH("layer_norm_backward_input_kernel");
  const int64_t chunks = std::min(rows, kLayerNormChunks);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((c + kThreads - 1) / kThreads), static_cast<unsigned>(chunks));
  layer_norm_param_partials_kernel<<<grid, kThreads, 0, ctx.stream()>>>(x, dy, mean, rstd, rows, c, rows_per_chunk,
                                                                      workspace);
  MIRRORED_CUDA_CHECK_LAUNCH("layer_norm_param_partials_kernel");
  layer_norm_param_grads_kernel<<<grid_for(c), kThreads, 0, ctx.stream()>>>(workspace, chunks, c, dgamma, dbeta);
  MIRRORED_CUDA_CHECK_LAUNCH("layer_norm_param_grads_kernel");
}

void gelu_forward(Context& ctx, const float* x, float* y, int64_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(x, y, n);
  MIRRORED_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

void gelu_backward(Context& ctx, const float* x, const float* dy, float* dx, int64_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(x, dy, dx, n);
  MIRRORED_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

}  // namespace mirrored::kernels::cuda
