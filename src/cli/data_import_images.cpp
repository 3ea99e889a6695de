// mirrored data import-images: a folder of JPEG/PNG images, one subfolder per class, into
// the HDF5 image datasets (data/image_import.h), with a progress line and a rate at the end.
#include <unistd.h>

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/data/image_import.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

// "H,W" (or one number for a square) -> height, width, each 1 to 8192.
void parse_size(const std::string& text, data::ImageImportOptions& options) {
  std::istringstream in(text);
  int64_t height = 0, width = 0;
  char comma = 0;
  in >> height;
  if (in >> comma) in >> width;
  else width = height;
  if (!in.eof() || in.fail() || (comma != 0 && comma != ',') || height < 1 || width < 1 || height > 8192 ||
      width > 8192)
    throw InputError(str_cat("--size '", text, "': expected H,W (or one side for a square), each 1 to 8192"),
                     ExitCode::kUsage);
  options.height = height;
  options.width = width;
}

// A progress line rewritten in place on a terminal; on a pipe, a line every 10 seconds.
std::function<void(int64_t, int64_t)> progress_printer() {
  const bool terminal = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  return [=](int64_t done, int64_t total) mutable {
    const auto now = std::chrono::steady_clock::now();
    if (!terminal && now - last < std::chrono::seconds(10) && done < total) return;
    last = now;
    const double seconds = std::chrono::duration<double>(now - start).count();
    const std::string line = str_cat("decoded ", done, " / ", total, " images (", done * 100 / std::max<int64_t>(total, 1),
                                     "%), ", fixed(static_cast<double>(done) / std::max(seconds, 1e-9), 0), " images/s");
    std::fprintf(stderr, terminal ? "\r%s\033[K" : "%s\n", line.c_str());
    std::fflush(stderr);
  };
}

// `option`: the training option that reads the split (data.train, data.test).
void report_split(const char* name, const char* option, const data::ImportedSplit& split) {
  if (split.paths.empty()) return;
  const auto count = static_cast<int64_t>(split.paths.size());
  if (count == 1) {
    chief_print(str_cat("wrote ", split.samples, " ", name, " samples to ", split.paths.front()));
    return;
  }
  std::string glob = split.paths.front();
  glob.replace(glob.rfind("-00000-of-"), 10, "-*-of-");
  chief_print(str_cat("wrote ", split.samples, " ", name, " samples in ", count, " shards, ", split.paths.front(), " to ",
                      split.paths.back(), " (", option, " = '", glob, "' reads them as one set)"));
}

void report(const data::ImageImportResult& result, int threads) {
  if (result.skipped > 0) {
    chief_print(str_cat("skipped ", result.skipped, " entries that are not image files (", result.skipped_symlinks,
                        " symbolic links, not followed), such as:"));
    for (const std::string& example : result.skipped_examples) chief_print("  " + example);
  }
  for (const std::string& name : result.empty_classes)
    rank_warning(str_cat("class folder '", name, "' holds no image (its label is kept)"));
  if (result.unreadable > 0) {
    rank_warning(str_cat(result.unreadable, " file(s) could not be read and were left out",
                         result.unreadable > static_cast<int64_t>(result.unreadable_examples.size()) ? "; the first:" : ":"));
    for (const std::string& example : result.unreadable_examples) rank_warning("  " + example);
  }
  report_split("training", "data.train", result.train);
  report_split("validation", "data.test", result.val);
  const int64_t images = result.train.samples + result.val.samples + result.unreadable;
  const double rate = static_cast<double>(images) / std::max(result.decode_seconds, 1e-9);
  chief_print(str_cat("decoded ", images, " images in ", fixed(result.decode_seconds, 2), " s on ", threads,
                      " thread(s): ", fixed(rate, 0), " images/s (", fixed(rate / threads, 0), " per thread)"));
}

}  // namespace

int import_images_command(const Args& args) {
  po::options_description desc(
      "mirrored data import-images --root DIR --out DIR [options]\n"
      "One subfolder of DIR per class (class names sorted into labels 0..K-1); the .jpg, .jpeg and .png files\n"
      "under each (symbolic links are not followed), decoded, resized (shorter side to the size, centre crop)\n"
      "and written as uint8 [C, H, W] to OUT/train.h5 (and OUT/val.h5), in sorted file order.\noptions");
  desc.add_options()("help,h", "print this help")(
      "root", po::value<std::string>()->required(), "folder of class subfolders")(
      "out", po::value<std::string>()->required(), "folder to write train.h5 (and val.h5) into")(
      "size", po::value<std::string>(), "H,W to resize to (default: the size of the first image)")(
      "channels", po::value<int64_t>()->default_value(3), "1 (gray) or 3 (RGB); images are converted")(
      "val", po::value<std::string>(), "a second folder with the same class subfolders, written to val.h5")(
      "val_fraction", po::value<double>()->default_value(0.0),
      "or this fraction of each class (chosen by a hash of its path) written to val.h5")(
      "shard_mb", po::value<int64_t>()->default_value(0),
      "write shards of at most this many MiB of samples each, train-00000-of-0000N.h5 and on (0: one file)")(
      "strict", po::bool_switch(), "an unreadable or corrupt image is an error (default: counted and left out)")(
      "compress", po::bool_switch(),
      "deflate the pixels: small, flat images shrink (MNIST-like by half), photographs by a quarter at most, for a "
      "write several times slower than the decoding")(
      "threads", po::value<int>()->default_value(0), "decoding threads (0: one per core)");
  po::variables_map values;
  if (!parse_options(args, desc, nullptr, values, "data import-images")) return 0;

  data::ImageImportOptions options;
  options.root = values["root"].as<std::string>();
  options.out_dir = values["out"].as<std::string>();
  if (values.count("size")) parse_size(values["size"].as<std::string>(), options);
  options.channels = values["channels"].as<int64_t>();
  if (options.channels != 1 && options.channels != 3)
    throw InputError(str_cat("--channels ", options.channels, ": expected 1 (gray) or 3 (RGB)"), ExitCode::kUsage);
  if (values.count("val")) options.val_root = values["val"].as<std::string>();
  options.val_fraction = values["val_fraction"].as<double>();
  const int64_t shard_mb = values["shard_mb"].as<int64_t>();
  if (shard_mb < 0 || shard_mb > (int64_t{1} << 30))
    throw InputError(str_cat("--shard_mb ", shard_mb, ": expected 0 (one file) to 2^30 MiB"), ExitCode::kUsage);
  options.shard_bytes = shard_mb << 20;
  options.strict = values["strict"].as<bool>();
  options.compress = values["compress"].as<bool>();
  const int threads = values["threads"].as<int>();
  if (threads < 0 || threads > 1024)
    throw InputError(str_cat("--threads ", threads, ": expected 0 (one per core) to 1024"), ExitCode::kUsage);
  options.threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.progress = progress_printer();

  const data::ImageImportResult result = data::import_images(options);
  if (isatty(STDERR_FILENO)) std::fputs("\n", stderr);
  chief_print(str_cat("found ", result.classes.size(), " classes in '", options.root, "', images stored as ",
                      shape_str(result.sample_shape), " (C, H, W)"));
  report(result, options.threads);
  return 0;
}

}  // namespace mirrored::cli
