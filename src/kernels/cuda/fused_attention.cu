// Fused causal self-attention on the GPU, the schedule of the CPU kernel
// (cpu/fused_attention.cpp) with one thread per row: no T x T matrix, key tiles above a
// query block's diagonal never loaded, one log-sum-exp per query row kept for backward.
//   forward:  a block holds kRows query rows; tiles of kKeyTile keys and values pass
//             through shared memory; each thread keeps its row's running max, sum and output.
//   backward: delta[r] = dO[r] . O[r]; then one thread per key row accumulates dK and dV
//             over the query rows at or after it, and one thread per query row accumulates
//             dQ over the keys at or before it (the scores recomputed in both), so every
//             sum has one owner and a fixed order: no atomics, the same bits every run.
// The exponentials are softmax_exp, the CPU's formula (transformer_math.h). Head sizes up
// to kMaxAttentionHeadSize (kernels.h: the same limit on the CPU); each row's vectors live
// in registers, sized by the head size rounded up to 32, 64 or 128.
// Grids: x counts blocks of kRows rows, y the (batch, head) pairs. Grid y holds at most
// 65,535 blocks, so more pairs than that are launched in chunks (over_pair_chunks), each
// kernel told the first pair of its chunk.
#include <algorithm>
#include <cmath>

#include "cuda_kernels.h"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/kernels/transformer_math.h"

namespace mirrored::kernels::cuda {
namespace {

constexpr int kRows = 64;      // threads per block, one row each
constexpr int kKeyTile = 32;   // rows of a shared-memory tile
constexpr int kMaxHead = static_cast<int>(kMaxAttentionHeadSize);
constexpr int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y

struct Head {
  int64_t t, c, hs;
  float scale;
};

// Copies rows [first, first + kKeyTile) of the part (0 q, 1 k, 2 v) of qkv, or of a [B, T, C]
// tensor when `stride` is c, into tile[kKeyTile][kHead]; rows past t are zero.
template <int kHead>
__device__ void load_tile(const float* base, int64_t stride, int64_t first, const Head& head,
                          float (*tile)[kHead]) {
  for (int i = threadIdx.x; i < kKeyTile * kHead; i += blockDim.x) {
    const int r = i / kHead, d = i % kHead;
    const int64_t row = first + r;
    tile[r][d] = row < head.t && d < head.hs ? base[row * stride + d] : 0.0f;
  }
}

template <int kHead>
__global__ void forward_kernel(const float* qkv, Head head, int64_t heads, int64_t first_pair, float* out, float* lse) {
  __shared__ float ks[kKeyTile][kHead], vs[kKeyTile][kHead];
  const int64_t pair = first_pair + blockIdx.y;
  const int64_t b = pair / heads, h = pair % heads;
  const int64_t row = blockIdx.x * int64_t{kRows} + threadIdx.x;
  const int64_t block_last = min(head.t - 1, blockIdx.x * int64_t{kRows} + kRows - 1);
  const float* base = qkv + b * head.t * 3 * head.c + h * head.hs;
  float q[kHead], o[kHead];
#pragma unroll
  for (int d = 0; d < kHead; ++d) {
    q[d] = row < head.t && d < head.hs ? base[row * 3 * head.c + d] : 0.0f;
    o[d] = 0.0f;
  }
  float row_max = 0.0f, row_sum = 0.0f;
  for (int64_t j0 = 0; j0 <= block_last; j0 += kKeyTile) {
    __syncthreads();
    load_tile<kHead>(base + head.c, 3 * head.c, j0, head, ks);
    load_tile<kHead>(base + 2 * head.c, 3 * head.c, j0, head, vs);
    __syncthreads();
    if (row >= head.t || j0 > row) continue;
    const int valid = static_cast<int>(min(int64_t{kKeyTile}, row - j0 + 1));
    float s[kKeyTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeyTile; ++j) {
      float dot = 0.0f;
#pragma unroll
      for (int d = 0; d < kHead; ++d) dot += q[d] * ks[j][d];
      s[j] = dot * head.scale;
      if (j < valid) tile_max = fmaxf(tile_max, s[j]);
    }
    const float new_max = j0 == 0 ? tile_max : fmaxf(row_max, tile_max);
    const float correction = j0 == 0 ? 0.0f : softmax_exp(row_max - new_max);
    float tile_sum = 0.0f;
#pragma unroll
    for (int d = 0; d < kHead; ++d) o[d] *= correction;
#pragma unroll
    for (int j = 0; j < kKeyTile; ++j) {
      const float p = j < valid ? softmax_exp(s[j] - new_max) : 0.0f;
      tile_sum += p;
#pragma unroll
      for (int d = 0; d < kHead; ++d) o[d] += p * vs[j][d];
    }
    row_sum = row_sum * correction + tile_sum;
    row_max = new_max;
  }
  if (row >= head.t) return;
  const float inv = 1.0f / row_sum;
  float* dst = out + (b * head.t + row) * head.c + h * head.hs;
#pragma unroll
  for (int d = 0; d < kHead; ++d)
    if (d < head.hs) dst[d] = o[d] * inv;
  lse[pair * head.t + row] = row_max + logf(row_sum);
}

// delta[(b, h), r] = dO[r] . O[r] over the head's channels.
__global__ void delta_kernel(const float* out, const float* dout, int64_t rows, Head head, int64_t heads,
                             float* delta) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows) return;
  const int64_t bh = i / head.t, r = i % head.t, b = bh / heads, h = bh % heads;
  const int64_t offset = (b * head.t + r) * head.c + h * head.hs;
  float sum = 0.0f;
  for (int64_t d = 0; d < head.hs; ++d) sum += dout[offset + d] * out[offset + d];
  delta[i] = sum;
}

// One thread per key row j: dV[j] = sum_{r >= j} P[r][j] dO[r], dK[j] = scale sum dS[r][j] Q[r].
template <int kHead>
__global__ void key_grad_kernel(const float* qkv, const float* dout, const float* lse, const float* delta, Head head,
                                int64_t heads, int64_t first_pair, float* dqkv) {
  __shared__ float qs[kKeyTile][kHead], dos[kKeyTile][kHead];
  __shared__ float lses[kKeyTile], deltas[kKeyTile];
  const int64_t pair = first_pair + blockIdx.y;
  const int64_t b = pair / heads, h = pair % heads;
  const int64_t key = blockIdx.x * int64_t{kRows} + threadIdx.x;
  const int64_t block_first = blockIdx.x * int64_t{kRows};
  const float* base = qkv + b * head.t * 3 * head.c + h * head.hs;
  const float* dbase = dout + b * head.t * head.c + h * head.hs;
  float k[kHead], v[kHead], dk[kHead], dv[kHead];
#pragma unroll
  for (int d = 0; d < kHead; ++d) {
    const bool in = key < head.t && d < head.hs;
    k[d] = in ? base[key * 3 * head.c + head.c + d] : 0.0f;
    v[d] = in ? base[key * 3 * head.c + 2 * head.c + d] : 0.0f;
    dk[d] = dv[d] = 0.0f;
  }
  // Query tiles from the block's first key on (earlier queries see none of its keys).
  for (int64_t r0 = block_first - block_first % kKeyTile; r0 < head.t; r0 += kKeyTile) {
    __syncthreads();
    load_tile<kHead>(base, 3 * head.c, r0, head, qs);
    load_tile<kHead>(dbase, head.c, r0, head, dos);
    for (int i = threadIdx.x; i < kKeyTile; i += blockDim.x) {
      const int64_t r = r0 + i;
      lses[i] = r < head.t ? lse[pair * head.t + r] : 0.0f;
      deltas[i] = r < head.t ? delta[pair * head.t + r] : 0.0f;
    }
    __syncthreads();
    if (key >= head.t) continue;
    for (int i = 0; i < kKeyTile; ++i) {
      const int64_t r = r0 + i;
      if (r < key || r >= head.t) continue;
      float dot = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < kHead; ++d) {
        dot += qs[i][d] * k[d];
        dp += dos[i][d] * v[d];
      }
      const float p = softmax_exp(dot * head.scale - lses[i]);
      const float ds = p * (dp - deltas[i]);
#pragma unroll
      for (int d = 0; d < kHead; ++d) {
        dv[d] += p * dos[i][d];
        dk[d] += ds * qs[i][d];
      }
    }
  }
  if (key >= head.t) return;
  float* dst = dqkv + (b * head.t + key) * 3 * head.c + h * head.hs;
#pragma unroll
  for (int d = 0; d < kHead; ++d)
    if (d < head.hs) {
      dst[head.c + d] = dk[d] * head.scale;
      dst[2 * head.c + d] = dv[d];
    }
}

// One thread per query row r: dQ[r] = scale sum_{j <= r} dS[r][j] K[j].
template <int kHead>
__global__ void query_grad_kernel(const float* qkv, const float* dout, const float* lse, const float* delta, Head head,
                                  int64_t heads, int64_t first_pair, float* dqkv) {
  __shared__ float ks[kKeyTile][kHead], vs[kKeyTile][kHead];
  const int64_t pair = first_pair + blockIdx.y;
  const int64_t b = pair / heads, h = pair % heads;
  const int64_t row = blockIdx.x * int64_t{kRows} + threadIdx.x;
  const int64_t block_last = min(head.t - 1, blockIdx.x * int64_t{kRows} + kRows - 1);
  const float* base = qkv + b * head.t * 3 * head.c + h * head.hs;
  float q[kHead], dO[kHead], dq[kHead];
#pragma unroll
  for (int d = 0; d < kHead; ++d) {
    const bool in = row < head.t && d < head.hs;
    q[d] = in ? base[row * 3 * head.c + d] : 0.0f;
    dO[d] = in ? dout[(b * head.t + row) * head.c + h * head.hs + d] : 0.0f;
    dq[d] = 0.0f;
  }
  const float row_lse = row < head.t ? lse[pair * head.t + row] : 0.0f;
  const float row_delta = row < head.t ? delta[pair * head.t + row] : 0.0f;
  for (int64_t j0 = 0; j0 <= block_last; j0 += kKeyTile) {
    __syncthreads();
    load_tile<kHead>(base + head.c, 3 * head.c, j0, head, ks);
    load_tile<kHead>(base + 2 * head.c, 3 * head.c, j0, head, vs);
    __syncthreads();
    if (row >= head.t) continue;
    for (int j = 0; j < kKeyTile && j0 + j <= row; ++j) {
      float dot = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < kHead; ++d) {
        dot += q[d] * ks[j][d];
        dp += dO[d] * vs[j][d];
      }
      const float ds = softmax_exp(dot * head.scale - row_lse) * (dp - row_delta);
#pragma unroll
      for (int d = 0; d < kHead; ++d) dq[d] += ds * ks[j][d];
    }
  }
  if (row >= head.t) return;
  float* dst = dqkv + (b * head.t + row) * 3 * head.c + h * head.hs;
#pragma unroll
  for (int d = 0; d < kHead; ++d)
    if (d < head.hs) dst[d] = dq[d] * head.scale;
}

Head head_of(int64_t t, int64_t c, int64_t heads) {
  const int64_t hs = c / heads;
  // The dispatching layer refuses these on every device first (kernels.h); this guards the
  // register arrays below.
  MIRRORED_CHECK(hs <= kMaxHead, "fused attention on the GPU: head size ", hs, " above ", kMaxHead);
  return Head{t, c, hs, 1.0f / std::sqrt(static_cast<float>(hs))};
}

// Calls launch(grid, first_pair) for the (batch, head) pairs in chunks of at most kMaxGridY,
// each grid kRows-row blocks along x and the chunk's pairs along y.
template <class Launch>
void over_pair_chunks(int64_t t, int64_t pairs, Launch&& launch) {
  const auto row_blocks = static_cast<unsigned>((t + kRows - 1) / kRows);
  for (int64_t first = 0; first < pairs; first += kMaxGridY)
    launch(dim3(row_blocks, static_cast<unsigned>(std::min(kMaxGridY, pairs - first))), first);
}

// Runs fn.template operator()<kHead> with kHead the head size rounded up to 32, 64 or 128.
template <class Fn>
void with_head_size(int64_t hs, Fn&& fn) {
  if (hs <= 32) fn.template operator()<32>();
  else if (hs <= 64) fn.template operator()<64>();
  else fn.template operator()<kMaxHead>();
}

}  // namespace

void fused_attention_forward(Context& ctx, const float* qkv, int64_t b_len, int64_t t_len, int64_t c, int64_t heads,
                             float* out, float* lse) {
  if (b_len == 0 || t_len == 0) return;
  const Head head = head_of(t_len, c, heads);
  with_head_size(head.hs, [&]<int kHead>() {
    over_pair_chunks(t_len, b_len * heads, [&](dim3 grid, int64_t first_pair) {
      forward_kernel<kHead><<<grid, kRows, 0, ctx.stream()>>>(qkv, head, heads, first_pair, out, lse);
      MIRRORED_CUDA_CHECK_LAUNCH("fused_attention forward_kernel");
    });
  });
}

int64_t fused_attention_backward_workspace_floats(int64_t b, int64_t t, int64_t heads) { return b * heads * t; }

void fused_attention_backward(Context& ctx, const float* qkv, const float* out, const float* lse, const float* dout,
                              int64_t b_len, int64_t t_len, int64_t c, int64_t heads, float* dqkv, float* workspace) {
  if (b_len == 0 || t_len == 0) return;
  const Head head = head_of(t_len, c, heads);
  const int64_t rows = b_len * heads * t_len;
  delta_kernel<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, ctx.stream()>>>(out, dout, rows, head, heads,
                                                                                   workspace);
  MIRRORED_CUDA_CHECK_LAUNCH("fused_attention delta_kernel");
  with_head_size(head.hs, [&]<int kHead>() {
    over_pair_chunks(t_len, b_len * heads, [&](dim3 grid, int64_t first_pair) {
      key_grad_kernel<kHead><<<grid, kRows, 0, ctx.stream()>>>(qkv, dout, lse, workspace, head, heads, first_pair,
                                                               dqkv);
      MIRRORED_CUDA_CHECK_LAUNCH("fused_attention key_grad_kernel");
      query_grad_kernel<kHead><<<grid, kRows, 0, ctx.stream()>>>(qkv, dout, lse, workspace, head, heads, first_pair,
                                                                 dqkv);
      MIRRORED_CUDA_CHECK_LAUNCH("fused_attention query_grad_kernel");
    });
  });
}

}  // namespace mirrored::kernels::cuda
