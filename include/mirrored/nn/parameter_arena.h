#pragma once
// All parameters of a model in one contiguous buffer, and all gradients in another, with
// layers holding views. Gradients can then be all-reduced in a few large pieces, zeroed
// with one memset, and updated by the optimizer in one pass.
//
// Two phases: layers declare() their parameters while the model is built, then allocate()
// creates both buffers and the views become valid.
//
// Buffers (declare_buffer) are model state that is not trained: batch norm's running
// statistics. They live in a third flat tensor, so the optimizer and the gradient
// all-reduce never touch them, but they are saved with the parameters (Keras's
// non-trainable weights).
#include <cstddef>
#include <string>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::nn {

struct ParameterInfo {
  std::string name;   // "0.linear.weight": layer index, layer kind, parameter
  Shape shape;
  int64_t offset = 0; // in elements, into the flat buffers
  size_t layer = 0;   // index of the owning layer in the model
};

class ParameterArena {
 public:
  // Returns the parameter's index. Only before allocate().
  size_t declare(std::string name, Shape shape, size_t layer);
  void allocate(Device device);
  bool allocated() const { return params_.defined(); }

  size_t size() const { return infos_.size(); }
  const ParameterInfo& info(size_t index) const { return infos_.at(index); }
  const std::vector<ParameterInfo>& infos() const { return infos_; }
  int64_t numel() const { return numel_; }

  Tensor param(size_t index) const;
  Tensor grad(size_t index) const;
  Tensor& flat_params() { return params_; }
  Tensor& flat_grads() { return grads_; }
  const Tensor& flat_params() const { return params_; }
  const Tensor& flat_grads() const { return grads_; }

  void zero_grads() { grads_.zero(); }

  // Non-trained state, same two phases. Buffer names share the parameters' namespace.
  size_t declare_buffer(std::string name, Shape shape, size_t layer);
  size_t num_buffers() const { return buffer_infos_.size(); }
  const ParameterInfo& buffer_info(size_t index) const { return buffer_infos_.at(index); }
  Tensor buffer(size_t index) const;
  Tensor& flat_buffers() { return buffers_; }
  const Tensor& flat_buffers() const { return buffers_; }

 private:
  std::vector<ParameterInfo> infos_;
  int64_t numel_ = 0;
  Tensor params_;
  Tensor grads_;
  std::vector<ParameterInfo> buffer_infos_;
  int64_t buffer_numel_ = 0;
  Tensor buffers_;

  // Throws InputError(kUsage) naming each flat buffer's size against the host's memory when
  // they cannot fit, before anything is allocated.
  void check_fits_in_host_memory() const;
  void require_new_name(const std::string& name) const;
};

}  // namespace mirrored::nn
