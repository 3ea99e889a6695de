#include "mirrored/nn/parameter_arena.h"

#include "mirrored/core/error.h"
#include "mirrored/core/host_memory.h"

namespace mirrored::nn {

size_t ParameterArena::declare(std::string name, Shape shape, size_t layer) {
  MIRRORED_CHECK(!allocated(), "declare(\"", name, "\") after the arena was allocated");
  require_new_name(name);
  const int64_t numel = shape_numel(shape);
  MIRRORED_CHECK(numel >= 0, "parameter \"", name, "\" has shape ", shape_str(shape));
  infos_.push_back({std::move(name), std::move(shape), numel_, layer});
  numel_ += numel;
  return infos_.size() - 1;
}

void ParameterArena::allocate(Device device) {
  MIRRORED_CHECK(!allocated(), "parameter arena allocated twice");
  if (device.is_cpu()) check_fits_in_host_memory();
  params_ = Tensor({numel_}, DType::kF32, device);
  grads_ = Tensor({numel_}, DType::kF32, device);
  buffers_ = Tensor({buffer_numel_}, DType::kF32, device);
}

void ParameterArena::check_fits_in_host_memory() const {
  const double floats = static_cast<double>(numel_) * 2.0 + static_cast<double>(buffer_numel_);
  const double needed = floats * sizeof(float);
  const HostMemory host = host_memory();
  if (host.total_bytes <= 0 || needed <= static_cast<double>(host.total_bytes) || infos_.empty()) return;
  const ParameterInfo* largest = &infos_.front();
  for (const ParameterInfo& info : infos_)
    if (shape_numel(info.shape) > shape_numel(largest->shape)) largest = &info;
  const double param_bytes = static_cast<double>(numel_) * sizeof(float);
  throw InputError(
      str_cat("the model does not fit in this host's memory: its parameters (", numel_, " floats, ",
              bytes_str(param_bytes), "), their gradients (", bytes_str(param_bytes), ") and its buffers (",
              buffer_numel_, " floats, ", bytes_str(static_cast<double>(buffer_numel_) * sizeof(float)), ") need ",
              bytes_str(needed), " per replica before any activation or optimizer state; this host has ",
              bytes_str(static_cast<double>(host.total_bytes)), " (", bytes_str(static_cast<double>(host.available_bytes)),
              " available). The largest parameter is ", largest->name, " ", shape_str(largest->shape)),
      ExitCode::kUsage);
}

void ParameterArena::require_new_name(const std::string& name) const {
  for (const ParameterInfo& info : infos_)
    MIRRORED_CHECK(info.name != name, "parameter \"", name, "\" declared twice");
  for (const ParameterInfo& info : buffer_infos_)
    MIRRORED_CHECK(info.name != name, "buffer \"", name, "\" declared twice");
}

size_t ParameterArena::declare_buffer(std::string name, Shape shape, size_t layer) {
  MIRRORED_CHECK(!allocated(), "declare_buffer(\"", name, "\") after the arena was allocated");
  require_new_name(name);
  const int64_t numel = shape_numel(shape);
  MIRRORED_CHECK(numel >= 0, "buffer \"", name, "\" has shape ", shape_str(shape));
  buffer_infos_.push_back({std::move(name), std::move(shape), buffer_numel_, layer});
  buffer_numel_ += numel;
  return buffer_infos_.size() - 1;
}

Tensor ParameterArena::buffer(size_t index) const {
  MIRRORED_CHECK(allocated(), "buffer(", index, ") before the arena was allocated");
  const ParameterInfo& b = buffer_info(index);
  return buffers_.view(b.offset, b.shape);
}

Tensor ParameterArena::param(size_t index) const {
  MIRRORED_CHECK(allocated(), "param(", index, ") before the arena was allocated");
  const ParameterInfo& p = info(index);
  return params_.view(p.offset, p.shape);
}

Tensor ParameterArena::grad(size_t index) const {
  MIRRORED_CHECK(allocated(), "grad(", index, ") before the arena was allocated");
  const ParameterInfo& p = info(index);
  return grads_.view(p.offset, p.shape);
}

}  // namespace mirrored::nn
