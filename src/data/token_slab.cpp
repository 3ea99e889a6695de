#include "token_slab.h"

namespace mirrored::data::detail {

int64_t h5_ok(int64_t status, const char* call, const std::string& path) {
  if (status < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw Error(ExitCode::kFailure, str_cat("HDF5 ", call, " failed on '", path, "' ", kTokensDataset));
  }
  return status;
}

namespace {

hid_t memory_type(int token_bytes) { return token_bytes == 1 ? H5T_NATIVE_UINT8 : H5T_NATIVE_UINT16; }

}  // namespace

TokenSlabReader::TokenSlabReader(io::H5File file, const TokenFileInfo& info)
    : path_(info.path), token_bytes_(info.token_bytes), file_(std::move(file)) {
  // Error stacks are per thread in a thread-safe HDF5; this reader may run on a prefetch
  // thread, whose failures are reported by exception, not printed.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const io::H5Handle access(static_cast<hid_t>(h5_ok(H5Pcreate(H5P_DATASET_ACCESS), "H5Pcreate", path_)), H5Pclose);
  h5_ok(H5Pset_chunk_cache(access.get(), 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT), "H5Pset_chunk_cache", path_);
  tokens_ = io::H5Handle(static_cast<hid_t>(h5_ok(H5Dopen2(file_.id(), kTokensDataset, access.get()), "H5Dopen2", path_)),
                         H5Dclose);
}

void TokenSlabReader::read(int64_t offset, int64_t count, void* out) const {
  if (count <= 0) return;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const io::H5Handle file_space(static_cast<hid_t>(h5_ok(H5Dget_space(tokens_.get()), "H5Dget_space", path_)), H5Sclose);
  const hsize_t start = static_cast<hsize_t>(offset), length = static_cast<hsize_t>(count);
  h5_ok(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &length, nullptr), "H5Sselect_hyperslab",
        path_);
  const io::H5Handle memory_space(static_cast<hid_t>(h5_ok(H5Screate_simple(1, &length, nullptr), "H5Screate_simple", path_)),
                                  H5Sclose);
  h5_ok(H5Dread(tokens_.get(), memory_type(token_bytes_), memory_space.get(), file_space.get(), H5P_DEFAULT, out),
        "H5Dread", path_);
}

void write_tokens_dataset(io::H5File& file, const void* data, int64_t count, int token_bytes) {
  MIRRORED_CHECK(token_bytes == 1 || token_bytes == 2, "token width ", token_bytes);
  const std::string& path = file.path();
  const hsize_t length = static_cast<hsize_t>(count);
  const io::H5Handle space(static_cast<hid_t>(h5_ok(H5Screate_simple(1, &length, nullptr), "H5Screate_simple", path)),
                           H5Sclose);
  const hid_t stored_type = token_bytes == 1 ? H5T_STD_U8LE : H5T_STD_U16LE;
  const io::H5Handle tokens(static_cast<hid_t>(h5_ok(H5Dcreate2(file.id(), kTokensDataset, stored_type, space.get(),
                                                                H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                                     "H5Dcreate2", path)),
                            H5Dclose);
  if (count > 0) {
    h5_ok(H5Dwrite(tokens.get(), memory_type(token_bytes), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dwrite", path);
  }
}

}  // namespace mirrored::data::detail
