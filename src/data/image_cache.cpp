#include "mirrored/data/image_cache.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "hdf5_rows.h"
#include "pixel_checks.h"

namespace mirrored::data {
namespace {

// About 64 KiB of samples per block when the file's chunks do not serve, and at least 16
// blocks in the cache.
constexpr BlockSizing kImageBlocks{.default_bytes = int64_t{64} << 10, .blocks_per_cache = 16, .min_items = 1};

// Pixels held as the in-memory reader holds them: float32, bytes as stored, or integers
// stored wider narrowed to bytes with a range check (HDF5's own conversion would clamp
// 300 to 255).
BlockSource pixel_blocks(std::shared_ptr<const detail::Hdf5Rows> rows, bool floats, int64_t block_samples) {
  if (floats) return detail::row_blocks(std::move(rows), H5T_NATIVE_FLOAT, block_samples);
  if (rows->stored_as_bytes()) return detail::row_blocks(std::move(rows), H5T_NATIVE_UINT8, block_samples);
  BlockSource source = detail::row_blocks(rows, H5T_NATIVE_UINT8, block_samples);
  source.read = [rows](int64_t first, int64_t count, std::byte* out) {
    const int64_t numel = rows->row_numel();
    std::vector<int64_t> wide(static_cast<size_t>(count * numel));
    rows->read(first, count, H5T_NATIVE_INT64, wide.data());
    detail::narrow_integer_pixels(wide.data(), count * numel, first * numel, numel, rows->path(),
                                  reinterpret_cast<uint8_t*>(out));
  };
  return source;
}

}  // namespace

ImageCache::ImageCache(const std::string& path, int64_t num_samples, int64_t sample_numel, bool floats,
                       ImageCacheOptions options)
    : ImageCache({ImageShard{path, num_samples}}, sample_numel, floats, options) {}

ImageCache::ImageCache(std::vector<ImageShard> shards, int64_t sample_numel, bool floats, ImageCacheOptions options)
    : shards_(std::move(shards)), sample_numel_(sample_numel), floats_(floats) {
  MIRRORED_CHECK(options.cache_bytes > 0, "image cache of ", options.cache_bytes, " bytes");
  MIRRORED_CHECK(!shards_.empty() && sample_numel > 0, shards_.size(), " shards of ", sample_numel, " pixels");
  hdf5_thread_safe_ = detail::hdf5_thread_safe();
  opener_ = std::this_thread::get_id();
  const int64_t sample_bytes = sample_numel_ * (floats_ ? int64_t{sizeof(float)} : int64_t{1});
  std::vector<BlockSource> sources;
  for (const ImageShard& shard : shards_) {
    MIRRORED_CHECK(shard.samples > 0, "'", shard.path, "' of ", shard.samples, " samples");
    auto rows = std::make_shared<const detail::Hdf5Rows>(shard.path, "/images", "samples");
    MIRRORED_CHECK(rows->rows() == shard.samples && rows->row_numel() == sample_numel, "'", shard.path,
                   "' /images holds ", rows->rows(), " samples of ", rows->row_numel(), " pixels, not ",
                   shard.samples, " of ", sample_numel);
    const int64_t block_samples = pick_block_items(options.block_samples, rows->chunk_rows(), sample_bytes,
                                                   shard.samples, options.cache_bytes, kImageBlocks);
    if (sources.empty()) block_samples_ = block_samples;
    sources.push_back(pixel_blocks(std::move(rows), floats_, block_samples));
    starts_.push_back(num_samples_);
    num_samples_ += shard.samples;
    path_ += str_cat(path_.empty() ? "" : ",", shard.path);
  }
  cache_ = std::make_unique<BlockCache>(std::move(sources), BlockCacheOptions{.capacity_bytes = options.cache_bytes});
}

ImageCache::~ImageCache() = default;

ImageCache::Sample ImageCache::sample(int64_t index) {
  MIRRORED_CHECK(index >= 0 && index < num_samples_, "sample ", index, " outside '", path_, "' of ", num_samples_,
                 " samples");
  if (!hdf5_thread_safe_ && std::this_thread::get_id() != opener_)
    throw Error(ExitCode::kUsage,
                str_cat("'", path_, "' is read through the image block cache from a second thread (a device "
                        "prefetcher), which needs an HDF5 library built thread-safe; this one is not. Set "
                        "data.cache_mb to 0 (or above the size of the images) to load the file whole"));
  // The last shard that starts at or before `index`.
  const auto shard = static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), index) - starts_.begin()) - 1;
  const int64_t local = index - starts_[static_cast<size_t>(shard)];
  std::shared_ptr<const Block> block = cache_->block_of(shard, local);
  const int64_t offset = (local - block->first_item()) * sample_numel_;
  return {std::move(block), offset};
}

void ImageCache::scan(
    const std::function<void(const Block& block, int64_t first_sample, const std::string& path)>& visit) const {
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    for_each_block(cache_->source(static_cast<int>(shard)), [&](const Block& block) {
      visit(block, starts_[shard] + block.first_item(), shards_[shard].path);
    });
  }
}

ImageCacheStats ImageCache::stats() const {
  ImageCacheStats stats;
  static_cast<BlockCacheStats&>(stats) = cache_->stats();
  stats.block_samples = block_samples_;
  return stats;
}

}  // namespace mirrored::data
