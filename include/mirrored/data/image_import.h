#pragma once
// A folder of JPEG and PNG images, one subfolder per class (torchvision's ImageFolder,
// Keras' image_dataset_from_directory), imported into the HDF5 image datasets: class names
// sorted into labels 0..K-1 (kept in the root attribute class_names), each image decoded
// (gray or RGB), resized (shorter side to the target, centre crop; image_resize.h) and
// stored uint8 [C, H, W], in sorted file order whatever the thread count. Files that cannot
// be read or decoded are counted and the first few named; with `strict` the first one is an
// InputError naming it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::data {

struct ImageImportOptions {
  std::string root;              // class subfolders
  std::string out_dir;           // train.h5 (and val.h5) are written here
  std::string val_root;          // a second folder of the same classes, written to val.h5
  double val_fraction = 0.0;     // or this fraction of each class, chosen by a hash of its path
  int64_t height = 0, width = 0; // 0: the first readable image's size
  int64_t channels = 3;          // 1 (gray) or 3 (RGB)
  int64_t shard_bytes = 0;       // shards of at most this many bytes of samples (0: one file a split)
  bool strict = false;
  bool compress = false;         // deflate the pixels (write_hdf5_dataset)
  int threads = 1;
  // Called from the importing thread about 5 times a second while images decode.
  std::function<void(int64_t done, int64_t total)> progress;
};

struct ImportedSplit {
  int64_t samples = 0;
  std::vector<std::string> paths;  // the files written, in order
};

struct ImageImportResult {
  std::vector<std::string> classes;
  Shape sample_shape;  // [C, H, W]
  ImportedSplit train, val;
  int64_t unreadable = 0;             // files that could not be read or decoded
  std::vector<std::string> unreadable_examples;  // the first few: "path: why"
  int64_t skipped = 0, skipped_symlinks = 0;     // entries that are not image files
  std::vector<std::string> skipped_examples;
  std::vector<std::string> empty_classes;        // class folders with no image
  double decode_seconds = 0.0;
};

ImageImportResult import_images(const ImageImportOptions& options);

}  // namespace mirrored::data
