#include "hdf5_rows.h"

#include <algorithm>
#include <utility>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::data::detail {
namespace {

// Stored bytes fall short of the declared data only through compression, and deflate, the
// only filter this project writes, stays below ~1032:1 (the io layer's whole-dataset
// reads hold files to the same ratio).
constexpr double kMaxCompressionRatio = 1100.0;

}  // namespace

Hdf5Rows::Hdf5Rows(const std::string& path, const char* dataset, const char* row_noun)
    : Hdf5Rows(io::H5File(path, io::H5File::Access::kRead), dataset, row_noun) {}

Hdf5Rows::Hdf5Rows(io::H5File file, const char* dataset, const char* row_noun)
    : file_(std::move(file)), dataset_(dataset), row_noun_(row_noun) {
  // Error stacks are per thread in a thread-safe HDF5; failures are reported by exception.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const io::H5Handle access(ok(H5Pcreate(H5P_DATASET_ACCESS), "H5Pcreate"), H5Pclose);
  ok(H5Pset_chunk_cache(access.get(), 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT), "H5Pset_chunk_cache");
  set_ = io::H5Handle(ok(H5Dopen2(file_.id(), dataset, access.get()), "H5Dopen2"), H5Dclose);
  const io::H5Handle space(ok(H5Dget_space(set_.get()), "H5Dget_space"), H5Sclose);
  const int rank = ok(H5Sget_simple_extent_ndims(space.get()), "H5Sget_simple_extent_ndims");
  if (rank < 1) fail("H5Sget_simple_extent_ndims (a scalar, not rows)", -1, 0);
  dims_.resize(static_cast<size_t>(rank));
  ok(H5Sget_simple_extent_dims(space.get(), dims_.data(), nullptr), "H5Sget_simple_extent_dims");
  for (size_t d = 1; d < dims_.size(); ++d) row_numel_ *= static_cast<int64_t>(dims_[d]);

  const io::H5Handle type(ok(H5Dget_type(set_.get()), "H5Dget_type"), H5Tclose);
  stored_as_bytes_ = H5Tget_size(type.get()) == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE;
  double declared = static_cast<double>(H5Tget_size(type.get()));
  for (const hsize_t d : dims_) declared *= static_cast<double>(d);
  const hsize_t stored = H5Dget_storage_size(set_.get());
  if (declared > static_cast<double>(stored) * kMaxCompressionRatio + 4096.0)
    throw InputError(str_cat("'", path(), "' ", dataset_, " declares ", static_cast<int64_t>(declared),
                             " bytes of data but the file holds ", stored,
                             " bytes of it; the file is truncated or corrupt"));

  const io::H5Handle create(ok(H5Dget_create_plist(set_.get()), "H5Dget_create_plist"), H5Pclose);
  if (H5Pget_layout(create.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(dims_.size());
    if (H5Pget_chunk(create.get(), rank, chunk.data()) == rank) chunk_rows_ = static_cast<int64_t>(chunk[0]);
  }
}

void Hdf5Rows::read(int64_t first, int64_t count, hid_t memory_type, void* out) const {
  if (count <= 0) return;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const io::H5Handle file_space(ok(H5Dget_space(set_.get()), "H5Dget_space", first, count), H5Sclose);
  std::vector<hsize_t> start(dims_.size(), 0), extent = dims_;
  start[0] = static_cast<hsize_t>(first);
  extent[0] = static_cast<hsize_t>(count);
  ok(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr),
     "H5Sselect_hyperslab", first, count);
  // The memory space has the selection's shape: with another shape (a flat one) HDF5 maps
  // every element to its chunk one at a time, hundreds of times slower.
  const io::H5Handle memory_space(
      ok(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr), "H5Screate_simple", first, count),
      H5Sclose);
  ok(H5Dread(set_.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, out), "H5Dread", first,
     count);
}

void Hdf5Rows::fail(const char* call, int64_t first, int64_t count) const {
  H5Eclear2(H5E_DEFAULT);
  if (first < 0) throw InputError(str_cat("'", path(), "': HDF5 ", call, " failed on ", dataset_));
  throw InputError(str_cat("'", path(), "': HDF5 ", call, " failed reading ", dataset_, " ", row_noun_,
                           row_noun_.empty() ? "" : " ", "[", first, ", ", first + count,
                           ") (a damaged or truncated file?)"));
}

BlockSource row_blocks(std::shared_ptr<const Hdf5Rows> rows, hid_t memory_type, int64_t block_items) {
  BlockSource source;
  source.items = rows->rows();
  source.item_bytes = rows->row_numel() * static_cast<int64_t>(H5Tget_size(memory_type));
  source.block_items = std::min(block_items, source.items);
  source.read = [rows = std::move(rows), memory_type](int64_t first, int64_t count, std::byte* out) {
    rows->read(first, count, memory_type, out);
  };
  return source;
}

hid_t native_unsigned(int bytes) {
  MIRRORED_CHECK(bytes == 1 || bytes == 2, "unsigned integers of ", bytes, " bytes");
  return bytes == 1 ? H5T_NATIVE_UINT8 : H5T_NATIVE_UINT16;
}

bool hdf5_thread_safe() {
  hbool_t thread_safe = 0;
  return H5is_library_threadsafe(&thread_safe) >= 0 && thread_safe != 0;
}

}  // namespace mirrored::data::detail
