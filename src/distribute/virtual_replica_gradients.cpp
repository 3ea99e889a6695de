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
      exact_sum_(tensor_segments(arena, total)) {
  MIRRORED_CHECK(local >= 1 && local <= total, local, " of ", total, " virtual replicas on one rank");
}

void VirtualReplicaGradients::restart() {
  std::fill(started_.begin(), started_.end(), 0);
  holder_ = -1;
}

void VirtualReplicaGradients::begin(int index) {
  MIRRORED_CHECK(index >= 0 && index < local(), "virtual replica ", index, " of ", local());
  Tensor& grads = arena_.flat_grads();
  if (holder_ == index) return;
  if (holder_ >= 0) {
    Tensor& slot = slots_[static_cast<size_t>(holder_)];
    if (!slot.defined()) slot = Tensor(grads.shape(), DType::kF32, grads.device());
    kernels::copy(grads, slot);
  }
  if (started_[static_cast<size_t>(index)]) {
    kernels::copy(slots_[static_cast<size_t>(index)], grads);
  } else if (holder_ >= 0) {
    grads.zero();  // restart() follows zero_grad(), so the first replica finds zeros
  }
  started_[static_cast<size_t>(index)] = 1;
  holder_ = index;
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
  exact_sum_(terms, out, grads.device(), comm);
  if (scale != 1.0f) kernels::scale(grads, scale);
}

}  // namespace mirrored::distribute
