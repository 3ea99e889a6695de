#pragma once
// Sums over ranks whose bits do not depend on how the terms are spread over ranks: the
// building block of a world-size-invariant reduction (the same model at any world size).
//
// A float sum depends on its order, and an all-reduce's order depends on the world size
// and the library's algorithm. An integer sum does not: it is exact in any order. So each
// segment of the buffer (a parameter tensor, say) is put on one fixed-point grid set by
// the largest magnitude of that segment over every term on every rank (a max all-reduce,
// also exact in any order), every term is rounded to that grid once, the integers are
// added (locally, then an int64 all-reduce), and the total is rounded to float once.
//
// Grid (kernels/exact_grid.h, the same formulas on CPU and GPU): with |x| < 2^e for every
// term of a segment and T terms in all, the quantum is 2^(e + max(ceil(log2 T), 11) - 62), so
// no partial sum can leave int64 and no term's integer exceeds 2^51 (which lets the
// conversion vectorise). A term is then exact to 2^-52 of the segment's largest magnitude
// (up to 2048 terms): far closer than a float32 sum, whose every addition rounds to 2^-24
// of the partial sum. Values below half a quantum round to zero: a term 2^52 times smaller
// than the segment's largest contributes nothing (a float32 sum drops a term 2^24 times
// smaller than its partial sum).
//
// Non-finite terms (NaN, Inf) have no grid: when any rank holds one in a segment, that
// segment is summed in float32 instead (an all-reduce), so NaN and Inf propagate as in a
// plain all-reduce and a NaN guard sees them everywhere; only finite sums are exact.
//
// The result is the same bits for the same multiset of terms whatever the world size,
// the order of terms on a rank or the order of ranks. -0 sums to +0.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/core/tensor.h"

namespace mirrored::comm {

struct ExactSumLayout {
  // Segment s is [offsets[s], offsets[s + 1]) of the buffer; offsets.front() == 0 and
  // offsets.back() == the buffer's length. Each segment gets a grid of its own.
  std::vector<size_t> offsets;
  // Terms summed over all ranks together (the same on every rank): sets the headroom.
  int64_t total_terms = 1;
};

// The sum for one layout, with its working buffers (an int64 per value, an exponent per
// segment) kept between calls: a fresh 8-bytes-per-value buffer every step would fault its
// pages in again. The grid conversions run on the buffers' device (kernels::exact_grid_*);
// GPU buffers need a communicator that takes them (NCCL), and the int64 all-reduce is then
// an ncclAllReduce, exact in any order like MPI's.
class ExactSum {
 public:
  explicit ExactSum(ExactSumLayout layout);
  const ExactSumLayout& layout() const { return layout_; }

  // out[i] = the sum of terms[t][i] over this rank's terms and every other rank's, rounded
  // to float once per segment's grid. `terms` may be empty on a rank (it contributes
  // nothing); `out` may be one of them. Every buffer lives on `device`. Collective over
  // `comm`: a small all-reduce (the grids), then the int64 sums' (on host buffers one per
  // window of 2^15 values, each summed, all-reduced and rounded while in cache), and when a
  // segment is not finite, the int64 sums over the whole buffer at once and a float sum.
  void operator()(const std::vector<const float*>& terms, float* out, Device device, Communicator& comm);
  // The same, where the largest magnitudes of some of `terms` were found as they were set
  // aside (kernels::exact_grid_largest): known_largest[s] holds their largest magnitude's bits
  // in segment s (host memory), and only `unscanned`, the other terms, are read for theirs.
  // The same bits as the call above. CPU buffers only.
  void operator()(const std::vector<const float*>& terms, const std::vector<const float*>& unscanned,
                  const uint32_t* known_largest, float* out, Device device, Communicator& comm);
  // The same bits again, times `scale` (each value rounded to float once, then multiplied
  // by `scale` in float: the bits of a scale pass after the sum, without the pass), and
  // afterwards each of `spent` (some of `terms`, not `out`) holds +0 at every value, zeroed
  // block by block as the sums read it: far cheaper than zeroing it cold later, for a
  // caller that reuses the memory as a zeroed accumulator. Returns whether they were
  // zeroed: false, leaving them as they were, when a segment was not finite (its float sum
  // reads the terms again). CPU buffers only.
  bool operator()(const std::vector<const float*>& terms, const std::vector<const float*>& unscanned,
                  const uint32_t* known_largest, const std::vector<float*>& spent, float* out, Device device,
                  Communicator& comm, float scale = 1.0f);

 private:
  // The working buffers on `device`; returns the exponents'.
  int32_t* prepare(Device device, Communicator& comm);
  // From the local exponents on: agree on them, sum on their grids, round into `out`
  // (times `scale`, host buffers only). `spent`: zeroed as read when every segment is
  // finite (the return value says so).
  bool sum_on_agreed_grids(const std::vector<const float*>& terms, const std::vector<float*>& spent, float* out,
                           Device device, Communicator& comm, float scale);
  // Host buffers with every segment finite: window by window (sum, all-reduce, round,
  // scale), so a window's int64 sums are still in cache when they are all-reduced and
  // rounded, instead of written out to memory and read back twice.
  void sum_by_windows(const std::vector<const float*>& terms, const std::vector<float*>& spent, float* out,
                      Communicator& comm, float scale);

  ExactSumLayout layout_;
  // On the device of the last call: exponents (int32, a segment each), sums (int64 values
  // held in an int32 tensor of twice the length: Tensor has no 64-bit integer type),
  // plain (float, only once a segment was not finite) and the exponents' host copy.
  Tensor exponents_, sums_, plain_, host_exponents_;
  // One window's segments (sum_by_windows), kept to spare an allocation per window.
  std::vector<size_t> window_offsets_;
  std::vector<int32_t> window_exponents_;
  std::vector<const float*> window_terms_;
  std::vector<float*> window_spent_;
};

// The same for host buffers, without keeping the working buffers.
void exact_sum(const std::vector<const float*>& terms, const ExactSumLayout& layout, float* out,
               Communicator& comm);

// The same for one value per term (losses, counts): `values` holds this rank's terms.
double exact_sum(const std::vector<double>& values, int64_t total_terms, Communicator& comm);

}  // namespace mirrored::comm
