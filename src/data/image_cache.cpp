#include "mirrored/data/image_cache.h"

#include <algorithm>

#include "mirrored/core/error.h"
#include "mirrored/io/hdf5.h"
#include "pixel_checks.h"

namespace mirrored::data {
namespace detail {

constexpr double kMaxCompressionRatio = 1100.0;  // as io/hdf5.cpp

// Reads ranges of samples of /images by hyperslab, as stored or narrowed to bytes. HDF5's
// own chunk cache is switched off: the ImageCache caches what it reads, and memory stays
// within its bound.
class ImageSlabReader {
 public:
  ImageSlabReader(const std::string& path, int64_t sample_numel) : path_(path), sample_numel_(sample_numel) {
    // Error stacks are per thread; failures are reported by exception, not printed.
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    file_ = io::H5Handle(static_cast<hid_t>(ok(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "H5Fopen")),
                         H5Fclose);
    const io::H5Handle access(static_cast<hid_t>(ok(H5Pcreate(H5P_DATASET_ACCESS), "H5Pcreate")), H5Pclose);
    ok(H5Pset_chunk_cache(access.get(), 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT), "H5Pset_chunk_cache");
    images_ = io::H5Handle(static_cast<hid_t>(ok(H5Dopen2(file_.get(), "/images", access.get()), "H5Dopen2")),
                           H5Dclose);
    const io::H5Handle space(static_cast<hid_t>(ok(H5Dget_space(images_.get()), "H5Dget_space")), H5Sclose);
    rank_ = static_cast<int>(ok(H5Sget_simple_extent_ndims(space.get()), "H5Sget_simple_extent_ndims"));
    dims_.resize(static_cast<size_t>(rank_));
    ok(H5Sget_simple_extent_dims(space.get(), dims_.data(), nullptr), "H5Sget_simple_extent_dims");

    const io::H5Handle type(static_cast<hid_t>(ok(H5Dget_type(images_.get()), "H5Dget_type")), H5Tclose);
    bytes_stored_ = H5Tget_size(type.get()) == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE;
    // The io layer's guard for whole reads, kept for reads in blocks: a damaged file may
    // declare far more samples than it stores (HDF5 returns the fill value for chunks never
    // written); only deflate, below ~1032:1, makes the stored bytes legitimately fewer.
    double declared = static_cast<double>(H5Tget_size(type.get()));
    for (const hsize_t d : dims_) declared *= static_cast<double>(d);
    const hsize_t stored = H5Dget_storage_size(images_.get());
    if (declared > static_cast<double>(stored) * kMaxCompressionRatio + 4096.0)
      throw InputError(str_cat("'", path_, "' /images declares ", static_cast<int64_t>(declared),
                               " bytes of data but the file holds ", stored,
                               " bytes of it; the file is truncated or corrupt"));
    const io::H5Handle create(static_cast<hid_t>(ok(H5Dget_create_plist(images_.get()), "H5Dget_create_plist")),
                              H5Pclose);
    if (H5Pget_layout(create.get()) == H5D_CHUNKED) {
      std::vector<hsize_t> chunk(static_cast<size_t>(rank_));
      if (H5Pget_chunk(create.get(), rank_, chunk.data()) == rank_) chunk_samples_ = static_cast<int64_t>(chunk[0]);
    }
  }

  int64_t chunk_samples() const { return chunk_samples_; }  // 0 when not chunked

  // Samples [first, first + count) into `block`, held as the in-memory reader holds them.
  void read(int64_t first, int64_t count, bool floats, ImageCache::Block& block) const {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const int64_t elements = count * sample_numel_;
    const io::H5Handle file_space(static_cast<hid_t>(ok(H5Dget_space(images_.get()), "H5Dget_space", first, count)),
                                  H5Sclose);
    std::vector<hsize_t> start(static_cast<size_t>(rank_), 0), extent = dims_;
    start[0] = static_cast<hsize_t>(first);
    extent[0] = static_cast<hsize_t>(count);
    ok(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr),
       "H5Sselect_hyperslab", first, count);
    // The memory space has the selection's shape: with another shape (a flat one) HDF5 maps
    // every element to its chunk one at a time, hundreds of times slower.
    const io::H5Handle memory_space(
        static_cast<hid_t>(ok(H5Screate_simple(rank_, extent.data(), nullptr), "H5Screate_simple", first, count)),
        H5Sclose);
    const auto read_as = [&](hid_t memory_type, void* out) {
      ok(H5Dread(images_.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, out), "H5Dread", first,
         count);
    };
    if (floats) {
      block.floats.resize(static_cast<size_t>(elements));
      read_as(H5T_NATIVE_FLOAT, block.floats.data());
    } else if (bytes_stored_) {
      block.bytes.resize(static_cast<size_t>(elements));
      read_as(H5T_NATIVE_UINT8, block.bytes.data());
    } else {
      std::vector<int64_t> wide(static_cast<size_t>(elements));
      read_as(H5T_NATIVE_INT64, wide.data());
      block.bytes.resize(wide.size());
      narrow_integer_pixels(wide.data(), elements, first * sample_numel_, sample_numel_, path_, block.bytes.data());
    }
  }

 private:
  // A failing call is an InputError naming the file, the dataset and the samples asked for.
  int64_t ok(int64_t status, const char* call, int64_t first = -1, int64_t count = 0) const {
    if (status >= 0) return status;
    H5Eclear2(H5E_DEFAULT);
    throw InputError(first < 0 ? str_cat("'", path_, "': HDF5 ", call, " failed on /images")
                               : str_cat("'", path_, "': HDF5 ", call, " failed reading /images samples [", first,
                                         ", ", first + count, ") (a damaged or truncated file?)"));
  }

  std::string path_;
  int64_t sample_numel_;
  io::H5Handle file_;
  io::H5Handle images_;
  int rank_ = 0;
  std::vector<hsize_t> dims_;
  bool bytes_stored_ = false;
  int64_t chunk_samples_ = 0;
};

}  // namespace detail

namespace {

constexpr int64_t kDefaultBlockBytes = int64_t{64} << 10;
constexpr int64_t kBlocksPerCache = 16;  // a default block is at most 1/16 of the cache

int64_t pick_block_samples(int64_t chunk_samples, int64_t sample_bytes, int64_t num_samples,
                           const ImageCacheOptions& options) {
  int64_t samples = options.block_samples;
  if (samples <= 0) {
    if (chunk_samples > 0 && 2 * chunk_samples * sample_bytes <= options.cache_bytes) {
      samples = chunk_samples;
    } else {
      const int64_t bytes = std::min(kDefaultBlockBytes, options.cache_bytes / kBlocksPerCache);
      samples = std::max<int64_t>(1, bytes / sample_bytes);
    }
  }
  return std::min(samples, num_samples);
}

}  // namespace

ImageCache::ImageCache(const std::string& path, int64_t num_samples, int64_t sample_numel, bool floats,
                       ImageCacheOptions options)
    : path_(path), num_samples_(num_samples), sample_numel_(sample_numel), floats_(floats) {
  MIRRORED_CHECK(options.cache_bytes > 0, "image cache of ", options.cache_bytes, " bytes");
  MIRRORED_CHECK(num_samples > 0 && sample_numel > 0, num_samples, " samples of ", sample_numel, " pixels");
  hbool_t thread_safe = 0;
  if (H5is_library_threadsafe(&thread_safe) < 0) thread_safe = 0;
  hdf5_thread_safe_ = thread_safe != 0;
  opener_ = std::this_thread::get_id();
  reader_ = std::make_unique<detail::ImageSlabReader>(path_, sample_numel_);
  const int64_t sample_bytes = sample_numel_ * (floats_ ? int64_t{sizeof(float)} : int64_t{1});
  block_samples_ = pick_block_samples(reader_->chunk_samples(), sample_bytes, num_samples_, options);
  capacity_bytes_ = std::max(options.cache_bytes, 2 * block_samples_ * sample_bytes);
  stats_.block_samples = block_samples_;
  stats_.capacity_bytes = capacity_bytes_;
}

ImageCache::~ImageCache() = default;

int64_t ImageCache::block_bytes(int64_t index) const {
  const int64_t samples = std::min(block_samples_, num_samples_ - index * block_samples_);
  return samples * sample_numel_ * (floats_ ? int64_t{sizeof(float)} : int64_t{1});
}

std::shared_ptr<ImageCache::Block> ImageCache::read_block(int64_t index) const {
  auto block = std::make_shared<Block>();
  const int64_t first = index * block_samples_;
  reader_->read(first, std::min(block_samples_, num_samples_ - first), floats_, *block);
  return block;
}

ImageCache::Sample ImageCache::sample(int64_t index) {
  MIRRORED_CHECK(index >= 0 && index < num_samples_, "sample ", index, " outside '", path_, "' of ", num_samples_,
                 " samples");
  if (!hdf5_thread_safe_ && std::this_thread::get_id() != opener_)
    throw Error(ExitCode::kUsage,
                str_cat("'", path_, "' is read through the image block cache from a second thread (a device "
                        "prefetcher), which needs an HDF5 library built thread-safe; this one is not. Set "
                        "data.cache_mb to 0 (or above the size of the images) to load the file whole"));
  const int64_t block_index = index / block_samples_;
  const int64_t offset = (index - block_index * block_samples_) * sample_numel_;
  // The read happens under the lock: the callers are at most a prefetch worker and the
  // main thread, and one read at a time keeps resident + loading within the bound.
  std::lock_guard lock(mutex_);
  const auto found = blocks_.find(block_index);
  if (found != blocks_.end()) {
    lru_.splice(lru_.begin(), lru_, found->second.recency);
    ++stats_.hits;
    return {found->second.data, offset};
  }
  const int64_t bytes = block_bytes(block_index);
  while (!lru_.empty() && resident_bytes_ + bytes > capacity_bytes_) {
    const int64_t victim = lru_.back();
    lru_.pop_back();
    resident_bytes_ -= block_bytes(victim);
    blocks_.erase(victim);
  }
  std::shared_ptr<const Block> data = read_block(block_index);
  ++stats_.misses;
  lru_.push_front(block_index);
  blocks_.emplace(block_index, Entry{data, lru_.begin()});
  resident_bytes_ += bytes;
  stats_.peak_resident_bytes = std::max(stats_.peak_resident_bytes, resident_bytes_);
  return {std::move(data), offset};
}

void ImageCache::scan(const std::function<void(int64_t first_sample, const Block& block)>& visit) const {
  for (int64_t index = 0; index < block_count(); ++index) {
    std::shared_ptr<const Block> block;
    {
      std::lock_guard lock(mutex_);
      block = read_block(index);
    }
    visit(index * block_samples_, *block);
  }
}

ImageCacheStats ImageCache::stats() const {
  std::lock_guard lock(mutex_);
  ImageCacheStats stats = stats_;
  stats.resident_bytes = resident_bytes_;
  return stats;
}

}  // namespace mirrored::data
