#pragma once
// Private to data/: one dataset of an HDF5 file read by ranges of its first dimension, its
// rows (the samples of /images, the tokens of /tokens), by hyperslab: the one reader under
// the block cache. HDF5's own chunk cache is switched off: the block cache holds what is
// read, and memory stays within its bound.
#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mirrored/data/block_cache.h"
#include "mirrored/io/hdf5.h"

namespace mirrored::data::detail {

class Hdf5Rows {
 public:
  // Opens `dataset` of `path` for reading; `row_noun` names the rows in messages
  // ("samples"; "" to give the range alone). An InputError names the file and the dataset
  // when a call fails, or when the dataset declares more bytes than the file holds (a
  // damaged file may: HDF5 returns the fill value for chunks never written).
  Hdf5Rows(const std::string& path, const char* dataset, const char* row_noun);
  // The same, of a file already open: what was checked through it is what is read.
  Hdf5Rows(io::H5File file, const char* dataset, const char* row_noun);

  const std::string& path() const { return file_.path(); }
  int64_t rows() const { return static_cast<int64_t>(dims_[0]); }
  int64_t row_numel() const { return row_numel_; }   // elements per row
  int64_t chunk_rows() const { return chunk_rows_; }  // rows per HDF5 chunk; 0 when not chunked
  bool stored_as_bytes() const { return stored_as_bytes_; }  // uint8 storage

  // Rows [first, first + count) into `out`, converted by HDF5 to `memory_type`. Safe to
  // call from several threads when HDF5 is built thread-safe (it serialises the calls).
  // An InputError names the file, the dataset and the rows.
  void read(int64_t first, int64_t count, hid_t memory_type, void* out) const;

 private:
  // A failing call (`status` < 0) is an InputError naming the file and the dataset, and the
  // rows [first, first + count) when `first` >= 0.
  template <typename Status>
  Status ok(Status status, const char* call, int64_t first = -1, int64_t count = 0) const {
    if (status < 0) fail(call, first, count);
    return status;
  }
  [[noreturn]] void fail(const char* call, int64_t first, int64_t count) const;

  io::H5File file_;
  std::string dataset_;
  std::string row_noun_;
  io::H5Handle set_;
  std::vector<hsize_t> dims_;
  int64_t row_numel_ = 1;
  int64_t chunk_rows_ = 0;
  bool stored_as_bytes_ = false;
};

// A block source of `rows` held as `memory_type` (its size per element), in blocks of
// `block_items` rows (at most all of them). The source shares the reader.
BlockSource row_blocks(std::shared_ptr<const Hdf5Rows> rows, hid_t memory_type, int64_t block_items);

// H5T_NATIVE_UINT8 or H5T_NATIVE_UINT16: unsigned integers of `bytes` 1 or 2.
hid_t native_unsigned(int bytes);

// Whether this HDF5 library is built thread-safe (Debian's is): only then may a thread
// read while another thread calls HDF5 (a prefetch thread, a checkpoint being written).
bool hdf5_thread_safe();

}  // namespace mirrored::data::detail
