#pragma once
// The model a ModelSpec (library_options.h) names, for samples of `sample_shape` and
// `num_classes` classes, not yet built. Throws InputError(kUsage) when the architecture
// does not fit the data (a cnn on non-image samples, convolutions that leave no pixels).
#include "mirrored/core/tensor.h"
#include "mirrored/nn/model.h"
#include "mirrored/train/library_options.h"

namespace mirrored::train {

nn::Model build_model(const ModelSpec& spec, const Shape& sample_shape, int num_classes);

}  // namespace mirrored::train
