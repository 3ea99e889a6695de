#include "mirrored/io/params_file.h"

#include <cstring>

#include "mirrored/core/cuda_memory.h"
#include "mirrored/io/hdf5.h"

namespace mirrored::io {
namespace {

std::string dataset_for(const nn::ParameterInfo& info) { return "/params/" + info.name; }

}  // namespace

void save_parameters(const std::string& path, const nn::ParameterArena& arena) {
  MIRRORED_CHECK(arena.allocated(), "saving parameters of an arena that is not allocated");
  write_hdf5_file(path, [&](H5File& file) {
    // Buffers (running statistics) are saved beside the parameters: a model needs them to
    // evaluate, and the world-size comparisons cover them too.
    for (size_t i = 0; i < arena.size() + arena.num_buffers(); ++i) {
      const bool is_param = i < arena.size();
      const nn::ParameterInfo& info = is_param ? arena.info(i) : arena.buffer_info(i - arena.size());
      const Tensor param = is_param ? arena.param(i) : arena.buffer(i - arena.size());
      if (param.device().is_cpu()) {
        file.write_f32(dataset_for(info), info.shape, param.data<float>());
      } else {
        file.write_f32(dataset_for(info), info.shape, param.to_vector().data());
      }
    }
  });
}

void load_parameters(const std::string& path, nn::ParameterArena& arena) {
  MIRRORED_CHECK(arena.allocated(), "loading parameters into an arena that is not allocated");
  const H5File file(path, H5File::Access::kRead);
  for (size_t i = 0; i < arena.size() + arena.num_buffers(); ++i) {
    const bool is_param = i < arena.size();
    const nn::ParameterInfo& info = is_param ? arena.info(i) : arena.buffer_info(i - arena.size());
    const std::string dataset = dataset_for(info);
    if (!file.exists(dataset)) {
      throw InputError(str_cat("'", path, "': parameter ", info.name, " is missing (no dataset ",
                               dataset, "); was the file saved from a different model?"),
                       ExitCode::kCheckpoint);
    }
    const Shape stored = file.shape(dataset);
    if (stored != info.shape) {
      throw InputError(str_cat("'", path, "': parameter ", info.name, " has shape ",
                               shape_str(stored), " in the file but the model expects ",
                               shape_str(info.shape)),
                       ExitCode::kCheckpoint);
    }
    if (file.type_class(dataset) != H5T_FLOAT) {
      throw InputError(str_cat("'", path, "': parameter ", info.name, " (", dataset,
                               ") is not floating point"),
                       ExitCode::kCheckpoint);
    }
    const std::vector<float> values = file.read_f32(dataset);
    Tensor param = is_param ? arena.param(i) : arena.buffer(i - arena.size());
    const size_t bytes = values.size() * sizeof(float);
    MIRRORED_CHECK(bytes == param.bytes(), "parameter ", info.name, " holds ", param.bytes(),
                   " bytes, file gives ", bytes);
    if (param.device().is_cpu()) {
      std::memcpy(param.data<float>(), values.data(), bytes);
    } else {
      cuda_copy(param.data<float>(), values.data(), bytes);
    }
  }
}

}  // namespace mirrored::io
