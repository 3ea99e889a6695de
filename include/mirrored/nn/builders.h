#pragma once
// Models from configuration.
#include <vector>

#include "mirrored/nn/model.h"

namespace mirrored::nn {

struct MlpSpec {
  std::vector<int64_t> hidden = {256, 128};
  int64_t num_classes = 10;
};
// Linear+ReLU for each hidden width, then Linear to num_classes. Not yet built.
Model mlp(const MlpSpec& spec);

struct CnnSpec {
  std::vector<int64_t> channels = {32, 64};  // one conv + pool stage per entry
  int64_t kernel = 5;
  int64_t padding = 0;
  int64_t pool = 2;
  std::vector<int64_t> hidden = {128};       // fully connected layers after the convs
  bool batchnorm = false;                    // BatchNorm2d after each conv (conv bias off)
  bool sync_batchnorm = false;
  float dropout = 0.0f;                      // after each hidden fully connected layer
  int64_t num_classes = 10;
};
// For each channel count: Conv2d(kernel, padding) [-> BatchNorm2d] -> ReLU -> MaxPool2d(pool),
// built as MaxPool2d then ReLU (the same function, cheaper: see builders.cpp);
// then Flatten, Linear+ReLU [+Dropout] per hidden width, Linear to num_classes.
Model cnn(const CnnSpec& spec);

struct ResNetSpec {
  std::vector<int64_t> channels = {16, 32, 64};  // one stage per entry
  int64_t blocks = 2;                             // residual blocks per stage
  bool sync_batchnorm = false;
  int64_t num_classes = 10;
};
// A small ResNet for 28x28 inputs: a 3x3 stem conv (channels[0]) + BatchNorm2d + ReLU,
// stages of basic residual blocks (the first block of every stage after the first halves
// the resolution), global average pooling, Flatten, Linear to num_classes.
Model resnet(const ResNetSpec& spec);

}  // namespace mirrored::nn
