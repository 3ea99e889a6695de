#include "mirrored/io/hdf5.h"

#include <algorithm>
#include <filesystem>

#include "h5_check.h"
#include "mirrored/core/log.h"

namespace mirrored::io {
namespace {

// Chunks of about this many bytes: large enough that deflate sees whole images, small
// enough that reading one sample does not inflate the whole file.
constexpr int64_t kChunkBytes = int64_t{1} << 20;
constexpr unsigned kDeflateLevel = 4;
constexpr int64_t kMaxElements = int64_t{1} << 48;
constexpr double kMaxCompressionRatio = 1100.0;

std::string on(const H5File& file, const std::string& object) {
  return str_cat("'", file.path(), "' ", object);
}

H5Handle open_dataset(const H5File& file, const std::string& name) {
  if (!file.exists(name)) {
    throw InputError(str_cat("'", file.path(), "': dataset ", name, " is missing"));
  }
  const hid_t id = H5Dopen2(file.id(), name.c_str(), H5P_DEFAULT);
  if (id < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError(str_cat("'", file.path(), "': ", name, " exists but is not a dataset"));
  }
  return H5Handle(id, H5Dclose);
}

std::vector<int64_t> dataset_shape(hid_t set, const std::string& target) {
  H5Handle space(MIRRORED_H5_CHECK(H5Dget_space(set), target), H5Sclose);
  const int rank = MIRRORED_H5_CHECK(H5Sget_simple_extent_ndims(space.get()), target);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  MIRRORED_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), target);
  // Every caller multiplies the dimensions; a damaged header must not overflow that.
  int64_t numel = 1;
  for (hsize_t d : dims) {
    if (d > static_cast<hsize_t>(kMaxElements) || (d > 0 && numel > kMaxElements / static_cast<int64_t>(d))) {
      throw InputError(str_cat(target, " declares dimensions ", shape_str(std::vector<int64_t>(dims.begin(), dims.end())),
                               " beyond 2^48 elements; the file is corrupt"));
    }
    numel *= static_cast<int64_t>(d);
  }
  return std::vector<int64_t>(dims.begin(), dims.end());
}

// A damaged or hostile file can declare a dataset far larger than the bytes it holds
// (HDF5 returns the fill value for chunks that were never written). Refuse before
// allocating: stored bytes fall short of the data only through compression, and deflate,
// the only filter this project writes, stays below ~1032:1.
void check_declared_size(hid_t set, int64_t numel, const std::string& target) {
  const H5Handle type(MIRRORED_H5_CHECK(H5Dget_type(set), target), H5Tclose);
  const auto declared = static_cast<double>(numel) * static_cast<double>(H5Tget_size(type.get()));
  const hsize_t stored = H5Dget_storage_size(set);
  if (declared > static_cast<double>(stored) * kMaxCompressionRatio + 4096.0) {
    throw InputError(str_cat(target, " declares ", static_cast<int64_t>(declared), " bytes of data but the file holds ",
                             stored, " bytes of it; the file is truncated or corrupt"));
  }
}

template <typename T>
std::vector<T> read_whole(const H5File& file, const std::string& name, hid_t memory_type) {
  const H5Handle set = open_dataset(file, name);
  const std::string target = on(file, name);
  const int64_t numel = shape_numel(dataset_shape(set.get(), target));
  check_declared_size(set.get(), numel, target);
  std::vector<T> values(static_cast<size_t>(numel));
  if (!values.empty()) {
    MIRRORED_H5_CHECK(
        H5Dread(set.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), target);
  }
  return values;
}

void write_whole(const H5File& file, const std::string& name, const std::vector<int64_t>& shape,
                 hid_t memory_type, hid_t file_type, const void* data, bool compress) {
  const std::string target = on(file, name);
  for (int64_t d : shape) MIRRORED_CHECK(d >= 0, "negative dimension writing ", target);
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  const int rank = static_cast<int>(dims.size());
  const int64_t numel = shape_numel(shape);

  H5Handle space(MIRRORED_H5_CHECK(rank == 0 ? H5Screate(H5S_SCALAR)
                                             : H5Screate_simple(rank, dims.data(), nullptr),
                                   target),
                 H5Sclose);
  H5Handle link_props(MIRRORED_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), target), H5Pclose);
  MIRRORED_H5_CHECK(H5Pset_create_intermediate_group(link_props.get(), 1), target);
  H5Handle create_props(MIRRORED_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), target), H5Pclose);
  if (compress && rank > 0 && numel > 0) {
    // Chunk along the sample dimension only, so each chunk holds whole samples.
    const int64_t row_bytes =
        numel / shape[0] * static_cast<int64_t>(H5Tget_size(file_type));
    std::vector<hsize_t> chunk = dims;
    chunk[0] = static_cast<hsize_t>(std::clamp<int64_t>(kChunkBytes / row_bytes, 1, shape[0]));
    MIRRORED_H5_CHECK(H5Pset_chunk(create_props.get(), rank, chunk.data()), target);
    MIRRORED_H5_CHECK(H5Pset_deflate(create_props.get(), kDeflateLevel), target);
  }
  H5Handle set(MIRRORED_H5_CHECK(H5Dcreate2(file.id(), name.c_str(), file_type, space.get(),
                                            link_props.get(), create_props.get(), H5P_DEFAULT),
                                 target),
               H5Dclose);
  if (numel > 0) {
    MIRRORED_H5_CHECK(H5Dwrite(set.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                      target);
  }
}

}  // namespace

H5Handle& H5Handle::operator=(H5Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    closer_ = other.closer_;
    other.id_ = -1;
  }
  return *this;
}

void H5Handle::reset() noexcept {
  if (id_ >= 0 && closer_ != nullptr && closer_(id_) < 0) {
    // Destructors must not throw; a failed close (a file's final flush) is still worth a line.
    try {
      rank_warning(str_cat("closing HDF5 object ", id_, " failed: ", detail::hdf5_error_reason()));
    } catch (...) {
    }
    H5Eclear2(H5E_DEFAULT);
  }
  id_ = -1;
}

H5File::H5File(const std::string& path, Access access) : path_(path) {
  detail::silence_hdf5_errors();
  if (access == Access::kReplace) {
    replacement_ = std::make_unique<FileReplacement>(path);
    // HDF5's own lock on the file would clash with the one the replacement holds (another
    // open of the same file): the replacement's is the one that counts.
    H5Handle access_props(MIRRORED_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), str_cat("'", path, "'")), H5Pclose);
    MIRRORED_H5_CHECK(H5Pset_file_locking(access_props.get(), false, true), str_cat("'", path, "'"));
    file_ = H5Handle(MIRRORED_H5_CHECK(H5Fcreate(replacement_->descriptor_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT,
                                                 access_props.get()),
                                       str_cat("'", path, "'")),
                     H5Fclose);
    return;
  }
  if (access == Access::kTruncate) {
    file_ = H5Handle(MIRRORED_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT,
                                                 H5P_DEFAULT),
                                       str_cat("'", path, "'")),
                     H5Fclose);
    return;
  }
  // Check the common mistakes first, so they get a plain message rather than HDF5's.
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) {
    throw InputError(str_cat("cannot open '", path, "': file does not exist"));
  }
  if (std::filesystem::is_directory(path, ignored)) {
    throw InputError(str_cat("cannot open '", path, "': it is a directory, not a file"));
  }
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 == 0) throw InputError(str_cat("'", path, "' is not an HDF5 file"));
  const hid_t id = is_hdf5 > 0 ? H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
  if (id < 0) {
    const std::string reason = detail::hdf5_error_reason();
    H5Eclear2(H5E_DEFAULT);
    throw InputError(str_cat("cannot open '", path, "': ", reason.empty() ? "unreadable" : reason));
  }
  file_ = H5Handle(id, H5Fclose);
}

bool H5File::exists(const std::string& object_path) const {
  // H5Lexists fails, instead of answering false, when a group on the way is missing, so
  // the path is checked one link at a time.
  std::string prefix;
  for (const std::string& part : split(object_path, '/')) {
    if (part.empty()) continue;
    prefix += "/" + part;
    if (MIRRORED_H5_CHECK(H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT), on(*this, prefix)) == 0) {
      return false;
    }
  }
  return true;
}

std::vector<int64_t> H5File::shape(const std::string& dataset) const {
  const H5Handle set = open_dataset(*this, dataset);
  return dataset_shape(set.get(), on(*this, dataset));
}

H5T_class_t H5File::type_class(const std::string& dataset) const {
  const H5Handle set = open_dataset(*this, dataset);
  const std::string target = on(*this, dataset);
  const H5Handle type(MIRRORED_H5_CHECK(H5Dget_type(set.get()), target), H5Tclose);
  return MIRRORED_H5_CHECK(H5Tget_class(type.get()), target);
}

std::vector<uint8_t> H5File::read_u8(const std::string& dataset) const {
  return read_whole<uint8_t>(*this, dataset, H5T_NATIVE_UINT8);
}

std::vector<int64_t> H5File::read_i64(const std::string& dataset) const {
  return read_whole<int64_t>(*this, dataset, H5T_NATIVE_INT64);
}

std::vector<float> H5File::read_f32(const std::string& dataset) const {
  return read_whole<float>(*this, dataset, H5T_NATIVE_FLOAT);
}

void H5File::write_u8(const std::string& dataset, const std::vector<int64_t>& shape,
                      const uint8_t* data, bool compress) {
  write_whole(*this, dataset, shape, H5T_NATIVE_UINT8, H5T_STD_U8LE, data, compress);
}

void H5File::write_f32(const std::string& dataset, const std::vector<int64_t>& shape,
                       const float* data) {
  write_whole(*this, dataset, shape, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, data, false);
}

void H5File::write_i64(const std::string& dataset, const std::vector<int64_t>& shape,
                       const int64_t* data) {
  write_whole(*this, dataset, shape, H5T_NATIVE_INT64, H5T_STD_I64LE, data, false);
}

void H5File::commit() {
  MIRRORED_CHECK(replacement_ != nullptr, "'", path_, "' was not opened to be replaced");
  // HDF5 writes its last metadata as it closes: a failure there is a failed write.
  if (H5Fclose(file_.release()) < 0) {
    const std::string reason = detail::hdf5_error_reason();
    H5Eclear2(H5E_DEFAULT);
    throw Error(ExitCode::kWriteFailed, str_cat("cannot write '", path_, "': HDF5 could not close it (", reason,
                                                "); '", path_, "' is unchanged"));
  }
  replacement_->commit();
}

void write_hdf5_file(const std::string& path, const std::function<void(H5File&)>& write) {
  try {
    H5File file(path, H5File::Access::kReplace);
    write(file);
    file.commit();
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    if (e.code() == ExitCode::kWriteFailed) throw;
    throw Error(ExitCode::kWriteFailed, str_cat("cannot write '", path, "': ", e.what(), " ('", path, "' is unchanged)"));
  }
}

void H5File::flush() {
  MIRRORED_H5_CHECK(H5Fflush(file_.get(), H5F_SCOPE_LOCAL), str_cat("'", path_, "'"));
}

}  // namespace mirrored::io
