#pragma once
// The model named by the configuration (`model`, `model.*`, `cnn.*`, `resnet.*` keys),
// not yet built.
#include "mirrored/core/tensor.h"
#include "mirrored/nn/model.h"
#include "mirrored/train/config.h"

namespace mirrored::train {

nn::Model make_model(const TrainConfig& config, const Shape& sample_shape, int num_classes);

}  // namespace mirrored::train
