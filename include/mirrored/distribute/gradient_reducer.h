#pragma once
// Averages a model's gradients over all replicas after backward. The model's arena keeps
// every gradient in one flat buffer, so this is a single mean all-reduce of that buffer.
#include "mirrored/comm/communicator.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::distribute {

class GradientReducer {
 public:
  GradientReducer(nn::ParameterArena& arena, comm::Communicator& comm);

  // Called as each layer's gradients become final during backward (reverse layer order).
  void on_layer_ready(size_t layer_index);
  // Returns once every gradient holds its mean over all replicas.
  void finish();

 private:
  nn::ParameterArena& arena_;
  comm::Communicator& comm_;
};

}  // namespace mirrored::distribute
