#include "mirrored/distribute/virtual_replica_gradients.h"

#include <algorithm>

#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {
namespace {
// One segment per parameter tensor (padding after a tensor goes with it): a grid per
// tensor keeps a small-gradient layer from being rounded on a large one's grid.
comm::ExactSumLayout tensor_segments(const nn::ParameterArena& arena, int64_t total_terms) {
  std::vector<size_t> starts;
  for (const nn::ParameterInfo& info : arena.infos()) starts.push_back(static_cast<size_t>(info.offset));
  std::sort(starts.begin(), starts.end());
  comm::ExactSumLayout layout;
  layout.offsets.push_back(0);
  for (const size_t start : starts)
    if (start > layout.offsets.back()) layout.offsets.push_back(start);
  const auto numel = static_cast<size_t>(arena.numel());
  if (numel > layout.offsets.back()) layout.offsets.push_back(numel);
  layout.total_terms = total_terms;
  return layout;
}
}  // namespace

VirtualReplicaGradients::VirtualReplicaGradients(nn::ParameterArena& arena, int local, int64_t total)
    : arena_(arena), slots_(static_cast<size_t>(local)), started_(static_cast<size_t>(local), 0),
      zeroed_(static_cast<size_t>(local), 0), largest_(static_cast<size_t>(local)), exact_sum_(tensor_segments(arena, total)) {
  MIRRORED_CHECK(local >= 1 && local <= total, local, " of ", total, " virtual replicas on one rank");
}

void VirtualReplicaGradients::restart() {
  std::fill(started_.begin(), started_.end(), 0);
  holder_ = -1;
}

void VirtualReplicaGradients::begin(int index) {
  MIRRORED_CHECK(index >= 0 && index < local(), "virtual replica ", index, " of ", local());
  if (holder_ == index) return;
  Tensor& grads = arena_.flat_grads();
  const bool resumed = started_[static_cast<size_t>(index)] != 0;
  // set_aside hands the arena the holder's slot memory: zeros already when the last exact
  // sum zeroed it as it read it.
  const bool arena_zeroed = holder_ >= 0 && zeroed_[static_cast<size_t>(holder_)] != 0;
  if (holder_ >= 0) set_aside(holder_);
  // The next replica's running sum replaces the arena's: its slot's, or zeros (restart()
  // follows zero_grad(), so the first replica finds zeros).
  if (resumed) {
    take_back(index);
  } else if (holder_ >= 0 && !arena_zeroed) {
    grads.zero();
  }
  started_[static_cast<size_t>(index)] = 1;
  holder_ = index;
}

void VirtualReplicaGradients::set_aside(int replica) {
  Tensor& grads = arena_.flat_grads();
  Tensor& slot = slots_[static_cast<size_t>(replica)];
  zeroed_[static_cast<size_t>(replica)] = 0;  // the slot now holds this replica's gradient
  if (!slot.defined()) slot = Tensor(grads.shape(), DType::kF32, grads.device());
  if (!grads.device().is_cpu()) {
    kernels::copy(grads, slot);
    return;
  }
  // On the host the arena and the slot exchange memory (every layer's gradient view
  // follows): no copy. The slot is scanned for its largest magnitude per segment while
  // backward's writes are still in cache, so the exact sum does not read it for its grids.
  grads.swap_allocation(slot);
  const std::vector<size_t>& offsets = exact_sum_.layout().offsets;
  std::vector<uint32_t>& largest = largest_[static_cast<size_t>(replica)];
  largest.resize(offsets.size() - 1);
  kernels::exact_grid_largest(slot.data<float>(), offsets, largest.data(), grads.device());
}

void VirtualReplicaGradients::take_back(int replica) {
  Tensor& grads = arena_.flat_grads();
  Tensor& slot = slots_[static_cast<size_t>(replica)];
  zeroed_[static_cast<size_t>(replica)] = 0;
  if (grads.device().is_cpu())
    grads.swap_allocation(slot);  // the slot keeps the arena's old memory, unused until set aside
  else
    kernels::copy(slot, grads);
}

void VirtualReplicaGradients::sum(comm::Communicator& comm, float scale) {
  Tensor& grads = arena_.flat_grads();
  float* out = grads.data<float>();
  std::vector<const float*> terms;
  for (int i = 0; i < local(); ++i) {
    if (!started_[static_cast<size_t>(i)]) continue;
    terms.push_back(i == holder_ ? out : slots_[static_cast<size_t>(i)].data<float>());
  }
  // The arena is one of the terms and the output: exact_sum reads every term before it
  // writes a segment's result.
  if (grads.device().is_cpu()) {
    // The slots' largest magnitudes were found as they were set aside: only the arena's
    // (the last replica's) are still to find.
    const size_t segments = exact_sum_.layout().offsets.size() - 1;
    known_largest_.assign(segments, 0);
    for (int i = 0; i < local(); ++i) {
      if (!started_[static_cast<size_t>(i)] || i == holder_) continue;
      const std::vector<uint32_t>& largest = largest_[static_cast<size_t>(i)];
      for (size_t s = 0; s < segments; ++s) known_largest_[s] = std::max(known_largest_[s], largest[s]);
    }
    std::vector<const float*> unscanned;
    if (holder_ >= 0) unscanned.push_back(out);
    // The slots are read once more, by the sum: it zeroes them as it goes, so the next
    // step's replicas start from them without zeroing them cold (the same +0 bits).
    std::vector<float*> spent;
    for (int i = 0; i < local(); ++i)
      if (started_[static_cast<size_t>(i)] && i != holder_) spent.push_back(slots_[static_cast<size_t>(i)].data<float>());
    // The scale is applied as each window of the sum is rounded, not in a pass of its own.
    const bool zeroed = exact_sum_(terms, unscanned, known_largest_.data(), spent, out, grads.device(), comm, scale);
    for (int i = 0; i < local(); ++i)
      if (started_[static_cast<size_t>(i)] && i != holder_) zeroed_[static_cast<size_t>(i)] = zeroed ? 1 : 0;
  } else {
    exact_sum_(terms, out, grads.device(), comm);
    if (scale != 1.0f) kernels::scale(grads, scale);
  }
}

}  // namespace mirrored::distribute
