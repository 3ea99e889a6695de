// An exact sum's grid conversions on the GPU, with the CPU's formulas (kernels/exact_grid.h),
// so a value lands on the same integer and a total rounds to the same float on either
// device. Each kernel is a 2-D grid: blockIdx.y picks the segment, blocks along x stride
// through it. The largest magnitude is found with an integer atomicMax, which gives the
// same answer in any order; the integer sums add each element's terms in one thread.
#include <algorithm>

#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/exact_grid.h"

namespace mirrored::kernels::cuda {
namespace {

// Where the kernels find the segments and terms: both uploaded to the device together.
struct Layout {
  const int64_t* offsets;     // segments + 1
  const float* const* terms;  // term_count pointers
  int term_count;
};

Layout upload(Context& ctx, const std::vector<const float*>& terms, const std::vector<size_t>& offsets) {
  // Offsets first, then the pointers (both 8 bytes wide).
  std::vector<uint64_t> host;
  host.reserve(offsets.size() + terms.size());
  for (const size_t offset : offsets) host.push_back(offset);
  for (const float* term : terms) host.push_back(reinterpret_cast<uint64_t>(term));
  const size_t bytes = host.size() * sizeof(uint64_t);
  auto* device = static_cast<uint64_t*>(ctx.exact_grid_layout_of_size(bytes));
  // From pageable memory: the source is copied before the call returns, so `host` may go.
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(device, host.data(), bytes, cudaMemcpyHostToDevice, ctx.stream()));
  return Layout{reinterpret_cast<const int64_t*>(device),
                reinterpret_cast<const float* const*>(device + offsets.size()), static_cast<int>(terms.size())};
}

// Blocks along x per segment: enough for the longest segment, capped (they stride).
dim3 grid_for_segments(const std::vector<size_t>& offsets) {
  size_t longest = 0;
  for (size_t s = 0; s + 1 < offsets.size(); ++s) longest = std::max(longest, offsets[s + 1] - offsets[s]);
  const size_t segments = offsets.size() - 1;
  MIRRORED_CHECK(segments <= 65535, "exact sum over ", segments, " segments (at most 65535 on a GPU)");
  constexpr size_t kMaxBlocksPerSegment = 256;
  const size_t blocks = std::clamp<size_t>((longest + kThreads - 1) / kThreads, 1, kMaxBlocksPerSegment);
  return dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(segments));
}

#define MIRRORED_SEGMENT_STRIDE(i, layout)                                                              \
  for (int64_t i = layout.offsets[blockIdx.y] + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;     \
       i < layout.offsets[blockIdx.y + 1]; i += int64_t{blockDim.x} * gridDim.x)

__device__ bool summed_on_grid(int32_t exponent) {
  return exponent != kGridAllZero && exponent != kGridNonFinite;
}

// Pass 1: each segment's largest magnitude bits, into `largest` (zeroed before).
__global__ void largest_magnitude_kernel(Layout layout, unsigned* largest) {
  unsigned best = 0;
  MIRRORED_SEGMENT_STRIDE(i, layout) {
    for (int t = 0; t < layout.term_count; ++t) best = max(best, magnitude_bits(layout.terms[t][i]));
  }
  for (int offset = 16; offset > 0; offset /= 2) best = max(best, __shfl_xor_sync(0xffffffffu, best, offset));
  if ((threadIdx.x & 31) == 0 && best != 0) atomicMax(largest + blockIdx.y, best);
}

// Pass 2, one thread per segment: the bits become the segment's exponent, in place.
__global__ void exponent_kernel(int32_t* exponents, int segments) {
  MIRRORED_GRID_STRIDE(s, segments) exponents[s] = grid_exponent(static_cast<uint32_t>(exponents[s]));
}

__global__ void grid_sums_kernel(Layout layout, const int32_t* exponents, int64_t total_terms, int64_t* sums) {
  const int32_t exponent = exponents[blockIdx.y];
  const bool on_grid = summed_on_grid(exponent);
  const double scale = on_grid ? ldexp(1.0, -grid_quantum(exponent, total_terms)) : 0.0;
  MIRRORED_SEGMENT_STRIDE(i, layout) {
    int64_t sum = 0;
    if (on_grid)
      for (int t = 0; t < layout.term_count; ++t) sum += grid_integer(layout.terms[t][i], scale);
    sums[i] = sum;
  }
}

__global__ void plain_sums_kernel(Layout layout, const int32_t* exponents, float* plain) {
  const bool non_finite = exponents[blockIdx.y] == kGridNonFinite;
  MIRRORED_SEGMENT_STRIDE(i, layout) {
    float sum = 0.0f;
    if (non_finite)
      for (int t = 0; t < layout.term_count; ++t) sum += layout.terms[t][i];  // in term order, as the CPU
    plain[i] = sum;
  }
}

__global__ void round_kernel(Layout layout, const int64_t* sums, const float* plain, const int32_t* exponents,
                             int64_t total_terms, float* out) {
  const int32_t exponent = exponents[blockIdx.y];
  if (exponent == kGridNonFinite) {
    MIRRORED_SEGMENT_STRIDE(i, layout) out[i] = plain != nullptr ? plain[i] : __int_as_float(0x7fc00000);
    return;
  }
  const int quantum = summed_on_grid(exponent) ? grid_quantum(exponent, total_terms) : 0;
  const float scale = ldexpf(1.0f, quantum);
  MIRRORED_SEGMENT_STRIDE(i, layout) out[i] = grid_to_float(sums[i], quantum, scale);
}

bool empty(const std::vector<size_t>& offsets) { return offsets.size() < 2; }

}  // namespace

void exact_grid_exponents(Context& ctx, const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          int32_t* exponents) {
  if (empty(offsets)) return;
  const int segments = static_cast<int>(offsets.size() - 1);
  MIRRORED_CUDA_CHECK(cudaMemsetAsync(exponents, 0, sizeof(int32_t) * segments, ctx.stream()));
  if (!terms.empty()) {
    const Layout layout = upload(ctx, terms, offsets);
    largest_magnitude_kernel<<<grid_for_segments(offsets), kThreads, 0, ctx.stream()>>>(
        layout, reinterpret_cast<unsigned*>(exponents));
    MIRRORED_CUDA_CHECK(cudaGetLastError());
  }
  exponent_kernel<<<grid_for(segments), kThreads, 0, ctx.stream()>>>(exponents, segments);
  MIRRORED_CUDA_CHECK(cudaGetLastError());
}

void exact_grid_sums(Context& ctx, const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums) {
  if (empty(offsets) || offsets.back() == 0) return;
  const Layout layout = upload(ctx, terms, offsets);
  grid_sums_kernel<<<grid_for_segments(offsets), kThreads, 0, ctx.stream()>>>(layout, exponents, total_terms, sums);
  MIRRORED_CUDA_CHECK(cudaGetLastError());
}

void exact_grid_plain_sums(Context& ctx, const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                           const int32_t* exponents, float* plain) {
  if (empty(offsets) || offsets.back() == 0) return;
  const Layout layout = upload(ctx, terms, offsets);
  plain_sums_kernel<<<grid_for_segments(offsets), kThreads, 0, ctx.stream()>>>(layout, exponents, plain);
  MIRRORED_CUDA_CHECK(cudaGetLastError());
}

void exact_grid_round(Context& ctx, const int64_t* sums, const float* plain, const std::vector<size_t>& offsets,
                      const int32_t* exponents, int64_t total_terms, float* out) {
  if (empty(offsets) || offsets.back() == 0) return;
  const Layout layout = upload(ctx, {}, offsets);
  round_kernel<<<grid_for_segments(offsets), kThreads, 0, ctx.stream()>>>(layout, sums, plain, exponents,
                                                                          total_terms, out);
  MIRRORED_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mirrored::kernels::cuda
