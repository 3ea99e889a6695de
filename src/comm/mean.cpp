#include "mean.h"

#include <cstdint>

#include "mirrored/core/bf16.h"

namespace mirrored::comm {
namespace {
template <typename T>
void divide(void* buffer, size_t count, int by) {
  auto* values = static_cast<T*>(buffer);
  const T factor = T(1) / static_cast<T>(by);
  for (size_t i = 0; i < count; ++i) values[i] *= factor;
}
}  // namespace

void divide_for_mean(void* buffer, size_t count, DataType type, ReduceOp op, int ranks) {
  if (op != ReduceOp::kMean || ranks <= 1) return;
  if (type == DataType::kF32) divide<float>(buffer, count, ranks);
  if (type == DataType::kF64) divide<double>(buffer, count, ranks);
  if (type == DataType::kBF16) {
    auto* values = static_cast<uint16_t*>(buffer);
    const float factor = 1.0f / static_cast<float>(ranks);
    for (size_t i = 0; i < count; ++i) values[i] = float_to_bf16(bf16_to_float(values[i]) * factor);
  }
}

}  // namespace mirrored::comm
