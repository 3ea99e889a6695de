#include "mirrored/comm/exact_sum.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "mirrored/core/error.h"
#include "mirrored/kernels/exact_grid.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::comm {
namespace {
template <typename T>
int32_t max_exponent(int32_t current, T x) {
  if (!std::isfinite(x)) return kernels::kGridNonFinite;
  if (x == 0 || current == kernels::kGridNonFinite) return current;
  int e = 0;
  std::frexp(x, &e);
  return current == kernels::kGridAllZero ? e : std::max(current, e);
}

// The scalar sums' grid (a few values, converted one by one with llrint): only int64's
// headroom bounds it, 2^(ceil(log2 T) - 63) of the largest magnitude.
int scalar_quantum_exponent(int32_t exponent, int64_t total_terms) {
  return exponent + kernels::grid_ceil_log2(total_terms) - 62;
}

int64_t to_grid(double x, int quantum) { return std::llrint(std::ldexp(x, -quantum)); }

// Values a window of sum_by_windows covers: its int64 sums (256 KiB), its terms and its
// output stay in a core's second-level cache (1 MiB and up on current x86 cores) from the
// sums through the all-reduce to the rounding, while each window's all-reduce is still
// large enough for its fixed cost not to count.
constexpr size_t kWindowValues = size_t{1} << 15;

// The segments that meet [begin, end) as a layout of their own: offsets from `begin`,
// each with its segment's exponent.
void window_segments(const std::vector<size_t>& offsets, const int32_t* exponents, size_t begin, size_t end,
                     std::vector<size_t>& window_offsets, std::vector<int32_t>& window_exponents) {
  window_offsets.assign(1, 0);
  window_exponents.clear();
  // The segment that holds `begin`: the last one starting at or before it (a non-empty one,
  // as begin < offsets.back()).
  auto s = static_cast<size_t>(std::upper_bound(offsets.begin(), offsets.end(), begin) - offsets.begin()) - 1;
  for (; s + 1 < offsets.size() && offsets[s] < end; ++s) {
    if (offsets[s + 1] <= begin) continue;
    window_offsets.push_back(std::min(offsets[s + 1], end) - begin);
    window_exponents.push_back(exponents[s]);
  }
}
}  // namespace

ExactSum::ExactSum(ExactSumLayout layout) : layout_(std::move(layout)) {
  MIRRORED_CHECK(!layout_.offsets.empty() && layout_.offsets.front() == 0,
                 "exact_sum: segment offsets must start at 0");
  MIRRORED_CHECK(layout_.total_terms >= 1 && layout_.total_terms <= (int64_t{1} << 30), "exact_sum of ",
                 layout_.total_terms, " terms (1 to 2^30)");
}

int32_t* ExactSum::prepare(Device device, Communicator& comm) {
  MIRRORED_CHECK(device.is_cpu() || comm.capabilities().device_buffers, "exact_sum of ", device.str(),
                 " buffers over the '", comm.backend(), "' communicator, which takes host buffers only");
  const std::vector<size_t>& offsets = layout_.offsets;
  const size_t segments = offsets.size() - 1, count = offsets.back();
  ensure_shape(exponents_, {static_cast<int64_t>(std::max<size_t>(segments, 1))}, DType::kI32, device);
  ensure_shape(sums_, {static_cast<int64_t>(std::max<size_t>(2 * count, 2))}, DType::kI32, device);
  return exponents_.data<int32_t>();
}

void ExactSum::operator()(const std::vector<const float*>& terms, float* out, Device device, Communicator& comm) {
  int32_t* exponents = prepare(device, comm);
  kernels::exact_grid_exponents(terms, layout_.offsets, exponents, device);
  sum_on_agreed_grids(terms, {}, out, device, comm, 1.0f);
}

void ExactSum::operator()(const std::vector<const float*>& terms, const std::vector<const float*>& unscanned,
                          const uint32_t* known_largest, float* out, Device device, Communicator& comm) {
  int32_t* exponents = prepare(device, comm);
  kernels::exact_grid_exponents(unscanned, layout_.offsets, known_largest, exponents, device);
  sum_on_agreed_grids(terms, {}, out, device, comm, 1.0f);
}

bool ExactSum::operator()(const std::vector<const float*>& terms, const std::vector<const float*>& unscanned,
                          const uint32_t* known_largest, const std::vector<float*>& spent, float* out,
                          Device device, Communicator& comm, float scale) {
  MIRRORED_CHECK(device.is_cpu(), "exact_sum zeroing its spent terms on ", device.str(), ": CPU buffers only");
  for (const float* buffer : spent)
    MIRRORED_CHECK(buffer != out && std::find(terms.begin(), terms.end(), buffer) != terms.end(),
                   "exact_sum: a spent buffer must be one of the terms and not the output");
  int32_t* exponents = prepare(device, comm);
  kernels::exact_grid_exponents(unscanned, layout_.offsets, known_largest, exponents, device);
  return sum_on_agreed_grids(terms, spent, out, device, comm, scale);
}

bool ExactSum::sum_on_agreed_grids(const std::vector<const float*>& terms, const std::vector<float*>& spent,
                                   float* out, Device device, Communicator& comm, float scale) {
  MIRRORED_CHECK(scale == 1.0f || device.is_cpu(), "exact_sum with a scale on ", device.str(), ": CPU buffers only");
  const std::vector<size_t>& offsets = layout_.offsets;
  const size_t segments = offsets.size() - 1, count = offsets.back();
  int32_t* exponents = exponents_.data<int32_t>();
  auto* sums = reinterpret_cast<int64_t*>(sums_.data<int32_t>());
  comm.allreduce(exponents, segments, ReduceOp::kMax);
  // Whether any segment needs the float sum: the host decides, so read the exponents.
  const int32_t* agreed = exponents;
  if (!device.is_cpu()) {
    ensure_shape(host_exponents_, {exponents_.numel()}, DType::kI32, Device::cpu());
    kernels::copy(exponents_, host_exponents_);
    agreed = host_exponents_.data<int32_t>();
  }
  const bool any_non_finite =
      std::any_of(agreed, agreed + segments, [](int32_t e) { return e == kernels::kGridNonFinite; });

  // Host buffers with every segment finite go window by window, zeroing the spent terms as
  // the integer sums read them. Otherwise one pass over the whole buffer, which leaves the
  // spent terms as they were: a float sum reads them again (and GPU callers have none).
  if (device.is_cpu() && !any_non_finite) {
    sum_by_windows(terms, spent, out, comm, scale);
    return !spent.empty();
  }
  kernels::exact_grid_sums(terms, offsets, exponents, layout_.total_terms, sums, device);
  float* plain = nullptr;
  if (any_non_finite) {
    // Segments holding NaN or Inf somewhere: a float32 sum, so they propagate as in an
    // all-reduce (every rank takes this branch: the exponents are the same everywhere).
    // Formed before `out`, which may be a term, is written.
    ensure_shape(plain_, {static_cast<int64_t>(std::max<size_t>(count, 1))}, DType::kF32, device);
    plain = plain_.data<float>();
    kernels::exact_grid_plain_sums(terms, offsets, exponents, plain, device);
  }
  comm.allreduce(sums, count, ReduceOp::kSum);
  if (any_non_finite) comm.allreduce(plain, count, ReduceOp::kSum);
  kernels::exact_grid_round(sums, plain, offsets, exponents, layout_.total_terms, out, device);
  if (scale != 1.0f) kernels::scale(out, static_cast<int64_t>(count), device, scale);
  return false;
}

void ExactSum::sum_by_windows(const std::vector<const float*>& terms, const std::vector<float*>& spent, float* out,
                              Communicator& comm, float scale) {
  const std::vector<size_t>& offsets = layout_.offsets;
  const size_t count = offsets.back();
  const int32_t* exponents = exponents_.data<int32_t>();
  auto* sums = reinterpret_cast<int64_t*>(sums_.data<int32_t>());
  // Every rank cuts the buffer at the same places: the windows' all-reduces match. A window
  // reads its part of every term before it writes its part of `out` (which may be a term),
  // and no other window touches that part. Every window's int64 sums use the same first
  // kWindowValues of sums_, so they stay in cache and are never written back to memory.
  for (size_t begin = 0; begin < count; begin += kWindowValues) {
    const size_t end = std::min(count, begin + kWindowValues), n = end - begin;
    window_segments(offsets, exponents, begin, end, window_offsets_, window_exponents_);
    window_terms_.clear();
    for (const float* term : terms) window_terms_.push_back(term + begin);
    window_spent_.clear();
    for (float* buffer : spent) window_spent_.push_back(buffer + begin);
    kernels::exact_grid_sums(window_terms_, window_offsets_, window_exponents_.data(), layout_.total_terms, sums,
                             window_spent_, Device::cpu());
    comm.allreduce(sums, n, ReduceOp::kSum);
    kernels::exact_grid_round(sums, nullptr, window_offsets_, window_exponents_.data(), layout_.total_terms,
                              out + begin, Device::cpu());
    if (scale != 1.0f) kernels::scale(out + begin, static_cast<int64_t>(n), Device::cpu(), scale);
  }
}

void exact_sum(const std::vector<const float*>& terms, const ExactSumLayout& layout, float* out,
               Communicator& comm) {
  ExactSum sum(layout);
  sum(terms, out, Device::cpu(), comm);
}

double exact_sum(const std::vector<double>& values, int64_t total_terms, Communicator& comm) {
  MIRRORED_CHECK(total_terms >= 1 && total_terms <= (int64_t{1} << 30), "exact_sum of ", total_terms,
                 " terms (1 to 2^30)");
  int32_t exponent = kernels::kGridAllZero;
  for (const double v : values) exponent = max_exponent(exponent, v);
  exponent = comm.allreduce_value(exponent, ReduceOp::kMax);
  if (exponent == kernels::kGridNonFinite) {
    double plain = 0.0;
    for (const double v : values) plain += v;
    return comm.allreduce_value(plain, ReduceOp::kSum);
  }
  const int quantum = exponent == kernels::kGridAllZero ? 0 : scalar_quantum_exponent(exponent, total_terms);
  int64_t sum = 0;
  if (exponent != kernels::kGridAllZero)
    for (const double v : values) sum += to_grid(v, quantum);
  sum = comm.allreduce_value(sum, ReduceOp::kSum);
  return std::ldexp(static_cast<double>(sum), quantum);
}

}  // namespace mirrored::comm
