// Softmax cross-entropy, one warp per row. Each row's loss (double) and hit flag go to a
// scratch array that is copied back and summed on the host in row order, so the total
// is deterministic and summed like the CPU kernel's; exp is the CPU's formula (softmax_exp).
#include <cfloat>

#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/transformer_math.h"

namespace mirrored::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;
constexpr int32_t kBadLabel = -1;

__global__ void cross_entropy_kernel(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                                     float* dlogits, float grad_scale, double* row_loss, int32_t* row_hit) {
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;  // whole warps leave together: the shuffles below stay full
  const float* x = logits + row * classes;
  const int32_t label = labels[row];
  if (label < 0 || label >= classes) {
    if (lane == 0) row_hit[row] = kBadLabel;
    return;
  }
  // Arg-max with the first index among ties (torch.argmax, the CPU kernel).
  float best = -FLT_MAX;
  int64_t best_index = classes;
  for (int64_t j = lane; j < classes; j += kWarp) {
    if (x[j] > best || (x[j] == best && j < best_index)) {
      best = x[j];
      best_index = j;
    }
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int64_t other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    if (other > best || (other == best && other_index < best_index)) {
      best = other;
      best_index = other_index;
    }
  }
  double sum = 0.0;
  for (int64_t j = lane; j < classes; j += kWarp) sum += static_cast<double>(softmax_exp(x[j] - best));
  for (int offset = kWarp / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (dlogits) {
    float* d = dlogits + row * classes;
    const float inv = static_cast<float>(1.0 / sum) * grad_scale;
    for (int64_t j = lane; j < classes; j += kWarp)
      d[j] = softmax_exp(x[j] - best) * inv - (j == label ? grad_scale : 0.0f);
  }
  if (lane == 0) {
    row_loss[row] = log(sum) - (static_cast<double>(x[label]) - best);
    row_hit[row] = best_index == label ? 1 : 0;
  }
}

// One block sums the row losses in a fixed order (each thread a strided run, then a tree),
// so the mean repeats bit for bit; a bad label anywhere makes it NaN.
__global__ void mean_loss_kernel(const double* row_loss, const int32_t* row_hit, int64_t rows, float* mean_loss) {
  __shared__ double sums[kThreads];
  __shared__ int bad[kThreads];
  double sum = 0.0;
  int any_bad = 0;
  for (int64_t i = threadIdx.x; i < rows; i += kThreads) {
    if (row_hit[i] == kBadLabel) any_bad = 1;
    else sum += row_loss[i];
  }
  sums[threadIdx.x] = sum;
  bad[threadIdx.x] = any_bad;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      bad[threadIdx.x] |= bad[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *mean_loss = bad[0] ? nanf("") : static_cast<float>(sums[0] / static_cast<double>(rows));
}

}  // namespace

void softmax_cross_entropy_mean(Context& ctx, const float* logits, const int32_t* labels, int64_t rows,
                                int64_t classes, float* dlogits, float grad_scale, float* mean_loss,
                                void* rows_scratch) {
  if (rows == 0) {
    MIRRORED_CUDA_CHECK(cudaMemsetAsync(mean_loss, 0, sizeof(float), ctx.stream()));
    return;
  }
  auto* row_loss = static_cast<double*>(rows_scratch);
  auto* row_hit = reinterpret_cast<int32_t*>(row_loss + rows);
  const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  cross_entropy_kernel<<<blocks, kThreads, 0, ctx.stream()>>>(logits, labels, rows, classes, dlogits, grad_scale,
                                                            row_loss, row_hit);
  MIRRORED_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
  mean_loss_kernel<<<1, kThreads, 0, ctx.stream()>>>(row_loss, row_hit, rows, mean_loss);
  MIRRORED_CUDA_CHECK_LAUNCH("mean_loss_kernel");
}

CrossEntropyResult softmax_cross_entropy(Context& ctx, const float* logits, const int32_t* labels, int64_t rows,
                                         int64_t classes, float* dlogits, float grad_scale) {
  CrossEntropyResult result;
  if (rows == 0) return result;
  const size_t bytes = static_cast<size_t>(rows) * (sizeof(double) + sizeof(int32_t));
  std::lock_guard lock(ctx.reduce_mutex);
  if (ctx.scratch.bytes() < bytes) ctx.scratch = DeviceBuffer(std::max<size_t>(bytes, 4096), ctx.device);
  if (ctx.host_scratch.bytes() < bytes) ctx.host_scratch = PinnedBuffer(std::max<size_t>(bytes, 4096));
  auto* row_loss = ctx.scratch.as<double>();
  auto* row_hit = reinterpret_cast<int32_t*>(row_loss + rows);
  const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  cross_entropy_kernel<<<blocks, kThreads, 0, ctx.stream()>>>(logits, labels, rows, classes, dlogits, grad_scale,
                                                            row_loss, row_hit);
  MIRRORED_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(ctx.host_scratch.data(), row_loss, bytes, cudaMemcpyDeviceToHost, ctx.stream()));
  MIRRORED_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  const auto* host_loss = static_cast<const double*>(ctx.host_scratch.data());
  const auto* host_hit = reinterpret_cast<const int32_t*>(host_loss + rows);
  for (int64_t i = 0; i < rows; ++i) {
    if (host_hit[i] == kBadLabel) {
      int32_t label = 0;
      MIRRORED_CUDA_CHECK(cudaMemcpy(&label, labels + i, sizeof(label), cudaMemcpyDeviceToHost));
      MIRRORED_CHECK(false, "label ", label, " of row ", i, " outside [0, ", classes, ")");
    }
    result.loss_sum += host_loss[i];
    result.correct += host_hit[i];
  }
  return result;
}

}  // namespace mirrored::kernels::cuda
