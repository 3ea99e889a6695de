// Checked entry points of an exact sum's grid conversions (kernels.h, "exact_grid_*"):
// raw memory of one device, cut into segments by host offsets.
#include "cpu/cpu_kernels.h"
#include "dispatch_checks.h"
#include "mirrored/kernels/exact_grid.h"

namespace mirrored::kernels {
namespace {
void check_segments(const char* op, const std::vector<size_t>& offsets) {
  MIRRORED_CHECK(!offsets.empty() && offsets.front() == 0, op, ": segment offsets must start at 0");
  for (size_t s = 0; s + 1 < offsets.size(); ++s)
    MIRRORED_CHECK(offsets[s] <= offsets[s + 1], op, ": segment ", s, " ends before it starts");
}

void check_terms(const char* op, int64_t total_terms) {
  MIRRORED_CHECK(total_terms >= 1 && total_terms <= (int64_t{1} << 30), op, " of ", total_terms,
                 " terms (1 to 2^30)");
}

void require_cpu(const char* op, Device device) {
  MIRRORED_CHECK(device.is_cpu(), op, " on ", device.str(), " in a build without CUDA");
}
}  // namespace

void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          int32_t* exponents, Device device) {
  check_segments("exact_grid_exponents", offsets);
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda()) return cuda::exact_grid_exponents(cuda::context(device.index), terms, offsets, exponents);
#endif
  require_cpu("exact_grid_exponents", device);
  cpu::exact_grid_exponents(terms, offsets, exponents);
}

void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          const uint32_t* known_largest, int32_t* exponents, Device device) {
  check_segments("exact_grid_exponents", offsets);
  MIRRORED_CHECK(device.is_cpu(), "exact_grid_exponents from known magnitudes on ", device.str(), ": CPU only");
  cpu::exact_grid_exponents(terms, offsets, known_largest, exponents);
}

void exact_grid_largest(const float* x, const std::vector<size_t>& offsets, uint32_t* largest, Device device) {
  check_segments("exact_grid_largest", offsets);
  MIRRORED_CHECK(device.is_cpu(), "exact_grid_largest on ", device.str(), ": CPU only");
  cpu::exact_grid_largest(x, offsets, largest);
}

void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums, Device device) {
  check_segments("exact_grid_sums", offsets);
  check_terms("exact_grid_sums", total_terms);
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda())
    return cuda::exact_grid_sums(cuda::context(device.index), terms, offsets, exponents, total_terms, sums);
#endif
  require_cpu("exact_grid_sums", device);
  cpu::exact_grid_sums(terms, offsets, exponents, total_terms, sums);
}

void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums,
                     const std::vector<float*>& spent, Device device) {
  check_segments("exact_grid_sums", offsets);
  check_terms("exact_grid_sums", total_terms);
  MIRRORED_CHECK(device.is_cpu(), "exact_grid_sums zeroing its spent terms on ", device.str(), ": CPU only");
  cpu::exact_grid_sums(terms, offsets, exponents, total_terms, sums, spent);
}

void exact_grid_plain_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                           const int32_t* exponents, float* plain, Device device) {
  check_segments("exact_grid_plain_sums", offsets);
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda()) return cuda::exact_grid_plain_sums(cuda::context(device.index), terms, offsets, exponents, plain);
#endif
  require_cpu("exact_grid_plain_sums", device);
  cpu::exact_grid_plain_sums(terms, offsets, exponents, plain);
}

void exact_grid_round(const int64_t* sums, const float* plain, const std::vector<size_t>& offsets,
                      const int32_t* exponents, int64_t total_terms, float* out, Device device) {
  check_segments("exact_grid_round", offsets);
  check_terms("exact_grid_round", total_terms);
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda())
    return cuda::exact_grid_round(cuda::context(device.index), sums, plain, offsets, exponents, total_terms, out);
#endif
  require_cpu("exact_grid_round", device);
  // On the host the exponents can be read: a non-finite segment needs its plain sums.
  for (size_t s = 0; s + 1 < offsets.size(); ++s)
    MIRRORED_CHECK(plain != nullptr || exponents[s] != kGridNonFinite, "exact_grid_round: segment ", s,
                   " is not finite and no plain sums were given");
  cpu::exact_grid_round(sums, plain, offsets, exponents, total_terms, out);
}

}  // namespace mirrored::kernels
