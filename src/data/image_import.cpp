#include "mirrored/data/image_import.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "image_decode.h"
#include "image_folder.h"
#include "mirrored/core/error.h"
#include "mirrored/data/hdf5_dataset.h"

namespace mirrored::data {
namespace {

using detail::ImageFile;
using detail::ImageFolder;

constexpr size_t kExamples = 5;
constexpr int kMaxClassFolders = 256;  // labels are uint8
// An HDF5 attribute is stored in the object header, which holds at most 64 KiB.
constexpr size_t kMaxClassNameBytes = 48 << 10;

// Asks for transparent huge pages under a large buffer about to be filled: its first touch
// then costs one page fault per 2 MiB instead of one per 4 KiB (a tenth of the import's
// time in 4 KiB faults otherwise). Advice only; ignored where unsupported.
void advise_huge_pages(std::vector<uint8_t>& buffer) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(buffer.data());
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = (begin + buffer.capacity()) & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

// Decodes files [first, first + count) of `files` on `threads` threads into `pixels`
// (sample i at i * numel); `why[i]` is set for each that fails. The calling thread reports
// progress until all are done.
struct DecodeJob {
  const std::vector<ImageFile>& files;
  int64_t height, width, channels;
  const std::function<void(int64_t)>& progress;
};

void decode_one(const DecodeJob& job, const ImageFile& file, uint8_t* out, std::string& why) {
  // Kept per thread: buffers of a few hundred KiB freed and allocated per image would be
  // mapped afresh each time (page faults cost as much as the decoding).
  thread_local std::vector<uint8_t> bytes;
  thread_local Image image;
  if (!detail::read_image_file(file.path, bytes, why)) return;
  if (!detail::decode_image(bytes, job.channels, {job.height, job.width}, image, why)) return;
  if (image.height == job.height && image.width == job.width) write_planar(image, out);  // a JPEG scaled exactly
  else write_planar(resize_and_crop(image, job.height, job.width), out);
}

void decode_range(const DecodeJob& job, int64_t first, int64_t count, int threads, std::vector<uint8_t>& pixels,
                  std::vector<std::string>& why) {
  const int64_t numel = job.channels * job.height * job.width;
  if (pixels.capacity() < static_cast<size_t>(count * numel)) {
    pixels.reserve(static_cast<size_t>(count * numel));
    advise_huge_pages(pixels);
  }
  pixels.resize(static_cast<size_t>(count * numel));  // a failed file's bytes are never read
  why.assign(static_cast<size_t>(count), std::string());
  std::atomic<int64_t> next{0}, done{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable finished;
  int running = threads;
  auto work = [&] {
    try {
      for (int64_t i; (i = next.fetch_add(1)) < count && !failed;) {
        decode_one(job, job.files[static_cast<size_t>(first + i)], pixels.data() + i * numel,
                   why[static_cast<size_t>(i)]);
        done.fetch_add(1);
      }
    } catch (...) {
      if (!failed.exchange(true)) failure = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(mutex);
    if (--running == 0) finished.notify_one();
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(work);
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (!finished.wait_for(lock, std::chrono::milliseconds(200), [&] { return running == 0; })) {
      lock.unlock();
      job.progress(done.load());
      lock.lock();
    }
  }
  for (std::thread& worker : workers) worker.join();
  if (failure) std::rethrow_exception(failure);
}

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

// Moves round(fraction * n) files of each class to `val`, chosen by a hash of their path
// within the folder (so a file's side does not depend on the other files' names); both keep
// sorted order.
void split_off(std::vector<ImageFile>& train, std::vector<ImageFile>& val, double fraction, int classes) {
  std::vector<std::vector<size_t>> members(static_cast<size_t>(classes));
  for (size_t i = 0; i < train.size(); ++i) members[static_cast<size_t>(train[i].label)].push_back(i);
  std::vector<bool> to_val(train.size(), false);
  for (std::vector<size_t>& indices : members) {
    const auto n_val = static_cast<size_t>(std::llround(fraction * static_cast<double>(indices.size())));
    std::sort(indices.begin(), indices.end(), [&](size_t a, size_t b) {
      const uint64_t ha = fnv1a(train[a].relative), hb = fnv1a(train[b].relative);
      return ha != hb ? ha < hb : train[a].relative < train[b].relative;
    });
    for (size_t k = 0; k < n_val; ++k) to_val[indices[k]] = true;
  }
  std::vector<ImageFile> kept;
  for (size_t i = 0; i < train.size(); ++i) (to_val[i] ? val : kept).push_back(std::move(train[i]));
  train = std::move(kept);
}

// The first readable image's declared size (the target when none is given).
detail::ImageSize first_image_size(const std::vector<ImageFile>& files) {
  std::vector<uint8_t> bytes;
  std::string why;
  for (const ImageFile& file : files) {
    detail::ImageSize size;
    if (detail::read_image_file(file.path, bytes, why) && detail::read_image_size(bytes, size, why)) return size;
  }
  throw InputError("no readable image to take the size from; give --size H,W");
}

class SplitWriter {
 public:
  // Every file written is also recorded in `written` (the caller removes them on failure).
  SplitWriter(const ImageImportOptions& options, const std::vector<std::string>& classes, const std::string& path,
              int64_t files, std::vector<std::string>& written)
      : path_(path), numel_(options.channels * options.height * options.width), compress_(options.compress),
        all_written_(written) {
    pending_.sample_shape = {options.channels, options.height, options.width};
    pending_.num_classes = static_cast<int>(classes.size());
    pending_.class_names = classes;
    per_shard_ = options.shard_bytes == 0 ? std::max<int64_t>(files, 1)
                                          : std::max<int64_t>(options.shard_bytes / (numel_ + 1), 1);
    planned_ = std::max<int64_t>((files + per_shard_ - 1) / per_shard_, 1);
    pending_.images.reserve(static_cast<size_t>(std::min(per_shard_, files) * numel_));
    advise_huge_pages(pending_.images);
  }
  int64_t per_shard() const { return per_shard_; }

  void add(const uint8_t* pixels, int label) {
    pending_.images.insert(pending_.images.end(), pixels, pixels + numel_);
    pending_.labels.push_back(static_cast<uint8_t>(label));
    ++pending_.size;
    if (pending_.size == per_shard_ && planned_ > 1) flush();
  }

  // Writes what is left; renames the shards when failed files made fewer than planned.
  ImportedSplit finish() {
    if (pending_.size > 0) flush();
    if (written_.empty()) throw InputError(str_cat("no image could be read for '", path_, "'"));
    const auto count = static_cast<int64_t>(written_.size());
    if (planned_ > 1 && count != planned_) {
      for (int64_t i = 0; i < count; ++i) {
        const std::string name = count == 1 ? path_ : shard_name(path_, i, count);
        std::filesystem::rename(written_[static_cast<size_t>(i)], name);
        all_written_.push_back(name);
        written_[static_cast<size_t>(i)] = name;
      }
    }
    return {samples_, written_};
  }

 private:
  void flush() {
    pending_.source = planned_ == 1 ? path_ : shard_name(path_, static_cast<int64_t>(written_.size()), planned_);
    write_hdf5_dataset(pending_.source, pending_, compress_);
    written_.push_back(pending_.source);
    all_written_.push_back(pending_.source);
    samples_ += pending_.size;
    pending_.images.clear();  // keeps its capacity for the next shard
    pending_.labels.clear();
    pending_.size = 0;
  }

  std::string path_;
  int64_t numel_;
  bool compress_;
  std::vector<std::string>& all_written_;
  Dataset pending_;
  int64_t per_shard_ = 1, planned_ = 1, samples_ = 0;
  std::vector<std::string> written_;
};

struct Tally {
  ImageImportResult& result;
  int64_t done = 0, total = 0;
};

ImportedSplit import_split(const ImageImportOptions& options, const std::vector<std::string>& classes,
                           const std::vector<ImageFile>& files, const std::string& path, Tally& tally,
                           std::vector<std::string>& written) {
  SplitWriter writer(options, classes, path, static_cast<int64_t>(files.size()), written);
  const std::function<void(int64_t)> progress = [&](int64_t done) {
    if (options.progress) options.progress(tally.done + done, tally.total);
  };
  const DecodeJob job{files, options.height, options.width, options.channels, progress};
  const int64_t numel = options.channels * options.height * options.width;
  // Decoded in chunks of about 32 MiB, the buffer reused (its pages are mapped once): memory
  // holds that and the shard being filled, whatever the size of the set.
  const int64_t chunk = std::clamp<int64_t>((int64_t{32} << 20) / numel, 16, 1024);
  std::vector<uint8_t> pixels;
  std::vector<std::string> why;
  for (int64_t first = 0; first < static_cast<int64_t>(files.size()); first += chunk) {
    const int64_t count = std::min<int64_t>(chunk, static_cast<int64_t>(files.size()) - first);
    decode_range(job, first, count, options.threads, pixels, why);
    for (int64_t i = 0; i < count; ++i) {
      const ImageFile& file = files[static_cast<size_t>(first + i)];
      const std::string& problem = why[static_cast<size_t>(i)];
      if (problem.empty()) {
        writer.add(pixels.data() + i * numel, file.label);
        continue;
      }
      if (options.strict) throw InputError(str_cat("'", file.path, "': ", problem, " (--strict)"));
      if (tally.result.unreadable_examples.size() < kExamples)
        tally.result.unreadable_examples.push_back(str_cat(file.path, ": ", problem));
      ++tally.result.unreadable;
    }
    tally.done += count;
    progress(0);
  }
  return writer.finish();
}

void check_options(const ImageImportOptions& options) {
  MIRRORED_CHECK(options.channels == 1 || options.channels == 3, "channels ", options.channels);
  MIRRORED_CHECK(options.threads >= 1 && options.shard_bytes >= 0, "threads ", options.threads);
  if (options.val_fraction < 0.0 || options.val_fraction >= 1.0 || !std::isfinite(options.val_fraction))
    throw InputError(str_cat("--val_fraction ", options.val_fraction, ": expected a fraction in [0, 1)"),
                     ExitCode::kUsage);
  if (options.val_fraction > 0.0 && !options.val_root.empty())
    throw InputError("give --val or --val_fraction, not both", ExitCode::kUsage);
}

// Classes of the training folder, checked; the validation folder must hold the same.
void check_classes(const ImageFolder& train, const ImageFolder* val) {
  const auto count = static_cast<int64_t>(train.classes.size());
  if (count < 2 || count > kMaxClassFolders)
    throw InputError(str_cat("'", train.root, "' holds ", count, " class folder(s); expected 2 to ", kMaxClassFolders,
                             " subfolders, one per class"));
  size_t name_bytes = 0;
  for (const std::string& name : train.classes) name_bytes += name.size() + 3;
  if (name_bytes > kMaxClassNameBytes)
    throw InputError(str_cat("the class folder names of '", train.root, "' take ", name_bytes, " bytes, more than the ",
                             kMaxClassNameBytes, " the attribute class_names holds"));
  if (val && val->classes != train.classes)
    throw InputError(str_cat("the class folders of '", val->root, "' (", val->classes.size(),
                             ") differ from those of '", train.root, "' (", train.classes.size(),
                             "); expected the same names"));
}

}  // namespace

ImageImportResult import_images(const ImageImportOptions& input) {
  check_options(input);
  ImageImportOptions options = input;
  const ImageFolder train_folder = detail::scan_image_folder(options.root);
  std::optional<ImageFolder> val_folder;
  if (!options.val_root.empty()) val_folder = detail::scan_image_folder(options.val_root);
  check_classes(train_folder, val_folder ? &*val_folder : nullptr);

  ImageImportResult result;
  result.classes = train_folder.classes;
  std::vector<ImageFile> train = train_folder.files, val;
  if (val_folder) val = val_folder->files;
  if (options.val_fraction > 0.0) split_off(train, val, options.val_fraction, static_cast<int>(result.classes.size()));
  for (const ImageFolder* folder : std::vector<const ImageFolder*>{&train_folder, val_folder ? &*val_folder : nullptr}) {
    if (!folder) continue;
    result.skipped += folder->symlinks + folder->other_files;
    result.skipped_symlinks += folder->symlinks;
    for (const std::string& example : folder->skipped_examples)
      if (result.skipped_examples.size() < kExamples) result.skipped_examples.push_back(example);
  }
  std::vector<int64_t> per_class(result.classes.size(), 0);
  for (const ImageFile& file : train_folder.files) ++per_class[static_cast<size_t>(file.label)];
  for (size_t label = 0; label < result.classes.size(); ++label)
    if (per_class[label] == 0) result.empty_classes.push_back(result.classes[label]);
  if (train.empty()) throw InputError(str_cat("'", options.root, "' holds no .jpg, .jpeg or .png files"));
  if (options.height == 0) {
    const detail::ImageSize size = first_image_size(train);
    options.height = size.height;
    options.width = size.width;
  }
  result.sample_shape = {options.channels, options.height, options.width};

  std::filesystem::create_directories(options.out_dir);
  Tally tally{result, 0, static_cast<int64_t>(train.size() + val.size())};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> written;  // removed again if the import fails part way (--strict)
  try {
    result.train = import_split(options, result.classes, train, options.out_dir + "/train.h5", tally, written);
    if (!val.empty())
      result.val = import_split(options, result.classes, val, options.out_dir + "/val.h5", tally, written);
  } catch (...) {
    std::error_code ignored;
    for (const std::string& path : written) std::filesystem::remove(path, ignored);
    throw;
  }
  result.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mirrored::data
