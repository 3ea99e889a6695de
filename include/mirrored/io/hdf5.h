#pragma once
// Thin RAII layer over the HDF5 C API. Every failing call throws mirrored::Error with the
// file name, the object path and the call; HDF5's own error stack printing is silenced.
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/tensor.h"

namespace mirrored::io {

// Owns one hid_t and closes it with the right H5*close. Movable, not copyable.
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~H5Handle() { reset(); }
  H5Handle(H5Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  H5Handle& operator=(H5Handle&& other) noexcept;
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() noexcept;
  // Gives up ownership: the caller closes the id (and sees whether that failed).
  hid_t release() noexcept {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

class H5File {
 public:
  // kRead: a missing file or a non-HDF5 file is an InputError naming the path.
  // kReplace: a new file that takes the place of `path` only at commit(), whole
  //   (core/file_replacement.h): HDF5 writes into a fresh temporary beside it.
  // kTruncate: creates or truncates `path` itself, following a symlink there: only for a
  //   scratch file nobody else can reach (tests); the product writes with kReplace.
  enum class Access { kRead, kReplace, kTruncate };
  H5File(const std::string& path, Access access);
  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }

  bool exists(const std::string& object_path) const;
  // Shape of a dataset; InputError naming file and dataset when it is missing.
  std::vector<int64_t> shape(const std::string& dataset) const;
  H5T_class_t type_class(const std::string& dataset) const;

  // Whole-dataset reads, converted by HDF5 to the requested element type.
  std::vector<uint8_t> read_u8(const std::string& dataset) const;
  std::vector<int64_t> read_i64(const std::string& dataset) const;
  std::vector<float> read_f32(const std::string& dataset) const;

  // Creates intermediate groups as needed. Large datasets are chunked and gzip-compressed
  // when `compress` is set.
  void write_u8(const std::string& dataset, const std::vector<int64_t>& shape, const uint8_t* data,
                bool compress = false);
  void write_f32(const std::string& dataset, const std::vector<int64_t>& shape, const float* data);
  void write_i64(const std::string& dataset, const std::vector<int64_t>& shape, const int64_t* data);

  void write_attribute(const std::string& name, int64_t value);      // on the root group
  void write_attribute(const std::string& name, const std::string& value);
  bool has_attribute(const std::string& name) const;
  int64_t read_int_attribute(const std::string& name) const;
  void write_real_attribute(const std::string& name, double value);
  // A scalar number (integer or floating point) as a double.
  double read_real_attribute(const std::string& name) const;
  std::string read_string_attribute(const std::string& name) const;

  void flush();
  // kReplace: closes the file and puts it in the place of path() (FileReplacement::commit).
  void commit();

 private:
  std::string path_;
  std::unique_ptr<FileReplacement> replacement_;  // kReplace only; declared first, closed last
  H5Handle file_;
};

// A new HDF5 file at `path`, written by `write`, whole or not at all (H5File::kReplace). A
// failure on the way (an HDF5 write on a full disk) is Error(kWriteFailed) naming `path`,
// which is then unchanged; an InputError from `write` passes as it is.
void write_hdf5_file(const std::string& path, const std::function<void(H5File&)>& write);

}  // namespace mirrored::io
