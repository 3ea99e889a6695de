#include "mirrored/io/checkpoint_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "mirrored/io/crc32_ieee.h"
#include "mirrored/io/hdf5.h"

namespace mirrored::io {
namespace {

constexpr const char* kFormat = "mirrored-checkpoint";

// The file's crc32 attribute: zlib's CRC-32, folded with carry-less multiplies where the CPU
// has them (io/crc32_ieee.h), chained over the payload's pieces.
class Crc {
 public:
  void add(const void* data, size_t bytes) { crc_ = crc32_ieee(data, bytes, crc_); }
  void add(int64_t value) { add(&value, sizeof(value)); }
  void add(const std::string& text) {
    add(static_cast<int64_t>(text.size()));
    add(text.data(), text.size());
  }
  // Bytes already checksummed elsewhere: `crc` of `bytes` bytes.
  void join(uint32_t crc, size_t bytes) { crc_ = crc32_ieee_combine(crc_, crc, bytes); }
  uint32_t value() const { return crc_; }

 private:
  uint32_t crc_ = 0;
};

void add_tensors(Crc& crc, const std::vector<CheckpointTensor>& tensors) {
  crc.add(static_cast<int64_t>(tensors.size()));
  for (const auto& tensor : tensors) {
    crc.add(tensor.name);
    crc.add(static_cast<int64_t>(tensor.shape.size()));
    for (int64_t d : tensor.shape) crc.add(d);
    const size_t bytes = tensor.values.size() * sizeof(float);
    if (tensor.values_crc) crc.join(*tensor.values_crc, bytes);
    else crc.add(tensor.values.data(), bytes);
  }
}

std::string names_of(const std::vector<CheckpointTensor>& tensors) {
  std::string names;
  for (const auto& tensor : tensors) {
    MIRRORED_CHECK(!tensor.name.empty() && tensor.name.find_first_of("/\n") == std::string::npos,
                   "checkpoint tensor name '", tensor.name, "' is empty or holds '/' or a newline");
    MIRRORED_CHECK(shape_numel(tensor.shape) == static_cast<int64_t>(tensor.values.size()), "tensor ", tensor.name,
                   " has ", tensor.values.size(), " values for shape ", shape_str(tensor.shape));
    if (!names.empty()) names += '\n';
    names += tensor.name;
  }
  return names;
}

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw InputError(str_cat("checkpoint '", path, "': ", what), ExitCode::kCheckpoint);
}

std::vector<CheckpointTensor> read_tensors(const H5File& file, const std::string& group, const std::string& list_attr) {
  std::vector<CheckpointTensor> tensors;
  const std::string list = file.read_string_attribute(list_attr);
  if (list.empty()) return tensors;
  for (const std::string& name : split(list, '\n')) {
    const std::string dataset = str_cat("/", group, "/", name);
    if (name.empty() || !file.exists(dataset)) invalid(file.path(), str_cat("dataset ", dataset, " is missing"));
    if (file.type_class(dataset) != H5T_FLOAT) invalid(file.path(), str_cat(dataset, " is not float32"));
    CheckpointTensor tensor;
    tensor.name = name;
    tensor.shape = file.shape(dataset);
    tensor.values = file.read_f32(dataset);
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

}  // namespace

uint32_t checkpoint_crc32(const Checkpoint& checkpoint) {
  Crc crc;
  for (int64_t value : {checkpoint.format_version, checkpoint.step, checkpoint.epoch, checkpoint.step_in_epoch,
                        checkpoint.steps_per_epoch, checkpoint.world_size, checkpoint.optimizer_steps})
    crc.add(value);
  crc.add(checkpoint.optimizer);
  crc.add(checkpoint.config);
  add_tensors(crc, checkpoint.params);
  add_tensors(crc, checkpoint.buffers);  // none in version 1: its checksums stay valid
  add_tensors(crc, checkpoint.optimizer_state);
  return crc.value();
}

void write_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  // Whole or not at all, through a unique temporary beside `path` (core/file_replacement.h):
  // a crash leaves the previous checkpoints and, at most, an abandoned temporary that the
  // next resume removes (remove_abandoned_checkpoint_temporaries).
  try {
    write_hdf5_file(path, [&](H5File& file) {
      for (const auto& tensor : checkpoint.params)
        file.write_f32("/params/" + tensor.name, tensor.shape, tensor.values.data());
      for (const auto& tensor : checkpoint.buffers)
        file.write_f32("/buffers/" + tensor.name, tensor.shape, tensor.values.data());
      for (const auto& tensor : checkpoint.optimizer_state)
        file.write_f32("/optimizer/" + tensor.name, tensor.shape, tensor.values.data());
      file.write_attribute("format", std::string(kFormat));
      file.write_attribute("format_version", checkpoint.format_version);
      file.write_attribute("step", checkpoint.step);
      file.write_attribute("epoch", checkpoint.epoch);
      file.write_attribute("step_in_epoch", checkpoint.step_in_epoch);
      file.write_attribute("steps_per_epoch", checkpoint.steps_per_epoch);
      file.write_attribute("world_size", checkpoint.world_size);
      file.write_attribute("optimizer", checkpoint.optimizer);
      file.write_attribute("optimizer_steps", checkpoint.optimizer_steps);
      file.write_attribute("config", checkpoint.config);
      file.write_attribute("params", names_of(checkpoint.params));
      file.write_attribute("buffers", names_of(checkpoint.buffers));
      file.write_attribute("optimizer_state", names_of(checkpoint.optimizer_state));
      file.write_attribute("crc32", static_cast<int64_t>(checkpoint_crc32(checkpoint)));
    });
  } catch (const Error& e) {
    throw Error(ExitCode::kCheckpoint, str_cat("cannot write checkpoint '", path, "': ", e.what()));
  }
}

namespace {

// "ckpt-<digits>.h5", the checkpoint writer's targets (checkpoint/checkpoint_store.cpp).
bool is_checkpoint_name(std::string_view name) {
  constexpr std::string_view prefix = "ckpt-", suffix = ".h5";
  if (name.size() <= prefix.size() + suffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix)
    return false;
  const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string_view::npos;
}

// The writer's own temporaries: FileReplacement's "ckpt-N.h5.tmp.XXXXXX", and the
// "ckpt-N.h5.tmp.<pid>" that versions before it left (HDF5's own lock held those while written).
bool is_checkpoint_temporary(std::string_view name) {
  if (is_replacement_temporary_of(name, is_checkpoint_name)) return true;
  const size_t mark = name.rfind(".tmp.");
  if (mark == std::string_view::npos || !is_checkpoint_name(name.substr(0, mark))) return false;
  const std::string_view pid = name.substr(mark + 5);
  return !pid.empty() && pid.size() <= 10 && pid.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

size_t remove_abandoned_checkpoint_temporaries(const std::string& dir) {
  return remove_abandoned_temporaries(dir, is_checkpoint_temporary);
}

Checkpoint read_checkpoint(const std::string& path) {
  Checkpoint checkpoint;
  uint32_t stored_crc = 0;
  try {
    const H5File file(path, H5File::Access::kRead);
    if (!file.has_attribute("format") || file.read_string_attribute("format") != kFormat)
      invalid(path, str_cat("not a mirrored checkpoint (no attribute format = \"", kFormat, "\")"));
    checkpoint.format_version = file.read_int_attribute("format_version");
    if (checkpoint.format_version < kOldestReadableCheckpointVersion ||
        checkpoint.format_version > kCheckpointFormatVersion)
      invalid(path, str_cat("format version ", checkpoint.format_version, ", but this build reads versions ",
                            kOldestReadableCheckpointVersion, " to ", kCheckpointFormatVersion));
    checkpoint.step = file.read_int_attribute("step");
    checkpoint.epoch = file.read_int_attribute("epoch");
    checkpoint.step_in_epoch = file.read_int_attribute("step_in_epoch");
    checkpoint.steps_per_epoch = file.read_int_attribute("steps_per_epoch");
    checkpoint.world_size = file.read_int_attribute("world_size");
    checkpoint.optimizer = file.read_string_attribute("optimizer");
    checkpoint.optimizer_steps = file.read_int_attribute("optimizer_steps");
    checkpoint.config = file.read_string_attribute("config");
    checkpoint.params = read_tensors(file, "params", "params");
    if (checkpoint.format_version >= 2) checkpoint.buffers = read_tensors(file, "buffers", "buffers");
    checkpoint.optimizer_state = read_tensors(file, "optimizer", "optimizer_state");
    stored_crc = static_cast<uint32_t>(file.read_int_attribute("crc32"));
  } catch (const InputError& e) {
    if (e.code() == ExitCode::kCheckpoint) throw;
    invalid(path, e.what());
  } catch (const Error& e) {
    // HDF5 failures inside a damaged file (a truncated chunk, a broken B-tree).
    invalid(path, str_cat("unreadable: ", e.what()));
  }
  const uint32_t actual = checkpoint_crc32(checkpoint);
  if (actual != stored_crc)
    invalid(path, str_cat("checksum mismatch (crc32 stored ", stored_crc, ", computed ", actual,
                          "): the file is corrupt"));
  if (checkpoint.step < 0 || checkpoint.epoch < 0 || checkpoint.step_in_epoch < 0 || checkpoint.world_size < 1 ||
      checkpoint.steps_per_epoch < 1 || checkpoint.optimizer_steps < 0)
    invalid(path, "negative or zero counters in its attributes");
  return checkpoint;
}

}  // namespace mirrored::io
