#include "mirrored/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "mirrored/core/error.h"
#include "mirrored/data/hdf5_dataset.h"

namespace mirrored::data {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
constexpr int kMaxDims = 4;
// A corrupted or hostile header could declare dims whose product is astronomically large;
// refuse before allocating anything. 16 GiB is far beyond any IDX file in use.
constexpr int64_t kMaxPayloadBytes = int64_t{1} << 34;
// gzread/gzwrite take an unsigned length and return an int, so big payloads go in pieces.
constexpr int64_t kMaxPiece = int64_t{1} << 30;
constexpr int64_t kGrowthStep = int64_t{64} << 20;

using GzFile = std::unique_ptr<gzFile_s, decltype(&gzclose)>;

std::string hex_byte(uint8_t byte) {
  constexpr const char* kDigits = "0123456789ABCDEF";
  return str_cat("0x", kDigits[byte >> 4], kDigits[byte & 0xF]);
}

// Reads up to `count` bytes; fewer only at the end of the data.
int64_t read_up_to(gzFile in, uint8_t* out, int64_t count, const std::string& path) {
  int64_t got = 0;
  while (got < count) {
    const auto piece = static_cast<unsigned>(std::min(count - got, kMaxPiece));
    const int n = gzread(in, out + got, piece);
    if (n < 0) {
      int code = 0;
      throw InputError(str_cat("'", path, "': cannot decompress: ", gzerror(in, &code)));
    }
    if (n == 0) break;
    got += n;
  }
  return got;
}

void read_header(gzFile in, const std::string& path, IdxArray& array) {
  uint8_t magic[4] = {};
  if (read_up_to(in, magic, 4, path) != 4) {
    throw InputError(str_cat("'", path, "': truncated IDX header (fewer than 4 bytes)"));
  }
  if (magic[0] != 0 || magic[1] != 0) {
    throw InputError(str_cat("'", path, "': bad IDX magic ", hex_byte(magic[0]), " ",
                             hex_byte(magic[1]), " (expected 0x00 0x00): not an IDX file"));
  }
  if (magic[2] != kUnsignedByte) {
    throw InputError(str_cat("'", path, "': unsupported IDX element type ", hex_byte(magic[2]),
                             " (only unsigned byte, 0x08, is supported)"));
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims) {
    throw InputError(str_cat("'", path, "': IDX header declares ", ndims,
                             " dimensions (expected 1 to ", kMaxDims, ")"));
  }
  int64_t bytes = 1;
  for (int i = 0; i < ndims; ++i) {
    uint8_t be[4] = {};
    if (read_up_to(in, be, 4, path) != 4) {
      throw InputError(str_cat("'", path, "': truncated IDX header (dimension ", i, " missing)"));
    }
    const int64_t dim = (int64_t{be[0]} << 24) | (int64_t{be[1]} << 16) | (int64_t{be[2]} << 8) |
                        int64_t{be[3]};
    array.dims.push_back(dim);
    // Each dim is below 2^32 and `bytes` stays at most 2^34, so this cannot overflow.
    if (dim > 0 && bytes > kMaxPayloadBytes / dim) {
      throw InputError(str_cat("'", path, "': IDX dimensions ", shape_str(array.dims),
                               "... describe more than ", kMaxPayloadBytes,
                               " bytes; the header is corrupt"));
    }
    bytes *= dim;
  }
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) {
    throw InputError(str_cat("cannot open '", path, "': file does not exist"));
  }
  if (std::filesystem::is_directory(path, ignored)) {
    throw InputError(str_cat("cannot open '", path, "': it is a directory, not a file"));
  }
  // gzopen reads plain files transparently, so .gz and uncompressed IDX take the same path.
  GzFile in(gzopen(path.c_str(), "rb"), &gzclose);
  if (!in) throw InputError(str_cat("cannot open '", path, "': ", std::strerror(errno)));

  IdxArray array;
  read_header(in.get(), path, array);
  const int64_t expected = shape_numel(array.dims);
  // The buffer grows with the data actually read: a corrupt header that claims gigabytes
  // in a file of a few bytes must not allocate them first.
  int64_t got = 0;
  while (got < expected) {
    const int64_t piece = std::min(expected - got, kGrowthStep);
    array.values.resize(static_cast<size_t>(got + piece));
    const int64_t n = read_up_to(in.get(), array.values.data() + got, piece, path);
    got += n;
    if (n < piece) break;
  }
  if (got != expected) {
    // zlib notes when a compressed stream was cut off mid-way; say so when it has.
    int code = Z_OK;
    gzerror(in.get(), &code);
    throw InputError(str_cat("'", path, "': truncated IDX payload: expected ", expected,
                             " bytes, got ", got,
                             code == Z_BUF_ERROR ? " (the gzip stream ends early)" : ""));
  }
  uint8_t extra = 0;
  if (read_up_to(in.get(), &extra, 1, path) != 0) {
    throw InputError(str_cat("'", path, "': IDX payload is longer than the ", expected,
                             " bytes its header ", shape_str(array.dims), " describes"));
  }
  return array;
}

void write_idx(const std::string& path, const IdxArray& array, bool gzip) {
  const auto ndims = static_cast<int>(array.dims.size());
  MIRRORED_CHECK(ndims >= 1 && ndims <= kMaxDims, "IDX arrays have 1 to 4 dims, got ", ndims);
  MIRRORED_CHECK(shape_numel(array.dims) == static_cast<int64_t>(array.values.size()), "dims ",
                 shape_str(array.dims), " for ", array.values.size(), " values");

  std::vector<uint8_t> header = {0, 0, kUnsignedByte, static_cast<uint8_t>(ndims)};
  for (int64_t dim : array.dims) {
    MIRRORED_CHECK(dim >= 0 && dim <= 0xFFFFFFFF, "IDX dimension ", dim, " does not fit 32 bits");
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<uint8_t>(dim >> shift));
  }

  // "T" asks zlib for a plain (transparent) write.
  GzFile out(gzopen(path.c_str(), gzip ? "wb" : "wbT"), &gzclose);
  if (!out) {
    throw Error(ExitCode::kFailure,
                where(__FILE__, __LINE__, str_cat("cannot create '", path, "': ", std::strerror(errno))));
  }
  auto write_all = [&](const uint8_t* data, int64_t count) {
    for (int64_t done = 0; done < count;) {
      const auto piece = static_cast<unsigned>(std::min(count - done, kMaxPiece));
      if (gzwrite(out.get(), data + done, piece) != static_cast<int>(piece)) {
        int code = 0;
        throw Error(ExitCode::kFailure, where(__FILE__, __LINE__,
                                              str_cat("gzwrite to '", path, "' failed: ",
                                                      gzerror(out.get(), &code))));
      }
      done += piece;
    }
  };
  write_all(header.data(), static_cast<int64_t>(header.size()));
  write_all(array.values.data(), static_cast<int64_t>(array.values.size()));
  if (gzclose(out.release()) != Z_OK) {
    throw Error(ExitCode::kFailure,
                where(__FILE__, __LINE__, str_cat("closing '", path, "' after writing failed")));
  }
}

namespace {

// The images and labels of two IDX files as one dataset, checked.
Dataset idx_dataset(const std::string& images_path, const std::string& labels_path, const std::string& out_path) {
  const IdxArray images = read_idx(images_path);
  const IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3) {
    throw InputError(str_cat("'", images_path, "': expected images of shape [N, H, W], got ",
                             shape_str(images.dims)));
  }
  if (labels.dims.size() != 1) {
    throw InputError(str_cat("'", labels_path, "': expected labels of shape [N], got ",
                             shape_str(labels.dims)));
  }
  if (images.dims[0] != labels.dims[0]) {
    throw InputError(str_cat("'", images_path, "' holds ", images.dims[0], " images but '",
                             labels_path, "' holds ", labels.dims[0], " labels"));
  }
  if (images.dims[0] == 0) throw InputError(str_cat("'", images_path, "': no images (N = 0)"));

  Dataset dataset;
  dataset.source = out_path;
  dataset.size = images.dims[0];
  dataset.sample_shape = {1, images.dims[1], images.dims[2]};
  // IDX carries no class count; the labels present are the best evidence of it.
  const uint8_t max_label = *std::max_element(labels.values.begin(), labels.values.end());
  dataset.num_classes = std::max(int{max_label} + 1, 2);
  dataset.images = images.values;
  dataset.labels = labels.values;
  return dataset;
}

}  // namespace

int64_t import_idx(const std::string& images_path, const std::string& labels_path,
                   const std::string& out_path) {
  const Dataset dataset = idx_dataset(images_path, labels_path, out_path);
  write_hdf5_dataset(out_path, dataset);
  return dataset.size;
}

ImportedShards import_idx_shards(const std::string& images_path, const std::string& labels_path,
                                 const std::string& out_path, int64_t shard_bytes) {
  const Dataset dataset = idx_dataset(images_path, labels_path, out_path);
  return {dataset.size, write_hdf5_shards(out_path, dataset, shard_bytes)};
}

}  // namespace mirrored::data
