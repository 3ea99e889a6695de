#pragma once
// The model a ModelSpec (library_options.h) names, for samples of `sample_shape` and
// `num_classes` classes, not yet built. Throws InputError(kUsage) when the architecture
// does not fit the data (a cnn on non-image samples, convolutions that leave no pixels).
#include "mirrored/core/tensor.h"
#include "mirrored/nn/model.h"
#include "mirrored/train/library_options.h"

namespace mirrored::train {

// The model with spec.precision set on it.
nn::Model build_model(const ModelSpec& spec, const Shape& sample_shape, int num_classes);

// One warning line on rank 0 when spec.precision = bf16 runs on a CPU without native
// bfloat16 instructions: correct, but slower than fp32.
void warn_about_slow_precision(const ModelSpec& spec, Device device, bool chief);

}  // namespace mirrored::train
