#include "mean.h"

#include <cstdint>

#include "mirrored/core/bf16.h"

namespace mirrored::comm {
namespace {
template <typename T>
void times_reciprocal(void* buffer, size_t count, int ranks) {
  auto* values = static_cast<T*>(buffer);
  const T factor = T(1) / static_cast<T>(ranks);
  for (size_t i = 0; i < count; ++i) values[i] *= factor;
}
}  // namespace

void mean_from_sum(void* buffer, size_t count, DataType type, ReduceOp op, int ranks) {
  if (op != ReduceOp::kMean || ranks <= 1) return;
  if (type == DataType::kF32) times_reciprocal<float>(buffer, count, ranks);
  if (type == DataType::kF64) times_reciprocal<double>(buffer, count, ranks);
  if (type == DataType::kBF16) {
    auto* values = static_cast<uint16_t*>(buffer);
    const float factor = 1.0f / static_cast<float>(ranks);
    for (size_t i = 0; i < count; ++i) values[i] = float_to_bf16(bf16_to_float(values[i]) * factor);
  }
}

}  // namespace mirrored::comm
