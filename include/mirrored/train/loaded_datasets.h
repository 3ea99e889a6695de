#pragma once
// The data sets a run has read, kept for its next Trainer. Under on_failure = shrink the
// owner of membership (elastic/elastic_run.h) builds a new Trainer after every lost rank,
// and reading Fashion-MNIST again was 95% of that Trainer's start (0.5-0.66 s per rank of
// 1.05-1.67 s on this project's 2-core machine). A data set depends on its files only,
// never on the world size or a rank: sharding happens above it (distribute/), so the same
// object serves every world a recovery makes. A hot spare loads them while it waits.
//
// A kept data set is reused only while its files are the ones it was read from (device,
// inode, size and modification time of every shard: core/file_replacement.h writes a new
// inode, an append changes the size); otherwise it is read again. Trainers follow one
// another, never overlap, so sharing a token set (which keeps a read cache) is safe.
// Not thread-safe: one Trainer, or one spare's loader thread, uses it at a time.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mirrored/config/library_options.h"
#include "mirrored/data/dataset.h"
#include "mirrored/data/token_dataset.h"

namespace mirrored::train {

class LoadedDatasets {
 public:
  // keep = false: every call reads the file (a Trainer of its own, `mirrored eval`).
  explicit LoadedDatasets(bool keep) : keep_(keep) {}

  // An HDF5 image set (config::load_dataset) and a token file (data::load_token_dataset).
  std::shared_ptr<const data::Dataset> images(const std::string& path, int64_t cache_mb);
  std::shared_ptr<data::TokenDataset> tokens(const std::string& path, int64_t cache_mb);

  // Reads what a Trainer of `lib` reads (data.train, and data.test when `with_eval`), so
  // that the Trainer only finds it here.
  void load_ahead(const config::LibraryOptions& lib, bool with_eval);

  // Identity of a file: what tells the file read earlier from one replaced since.
  struct FileIdentity {
    uint64_t device = 0;
    uint64_t inode = 0;
    int64_t size = 0;
    int64_t modified_ns = 0;
    bool operator==(const FileIdentity&) const = default;
  };

 private:
  struct Kept {
    std::string path;
    int64_t cache_mb = 0;
    std::vector<FileIdentity> files;
    std::shared_ptr<const data::Dataset> images;
    std::shared_ptr<data::TokenDataset> tokens;
  };
  template <typename Load>
  const Kept& find_or_load(const std::string& path, int64_t cache_mb, bool want_tokens, Load&& load);

  bool keep_;
  std::vector<Kept> kept_;  // a run reads a handful at most: the training and the test set
};

}  // namespace mirrored::train
