#pragma once
// Datasets kept loaded across the Trainers of one process (on_failure = shrink): after a
// lost rank the owner of membership (elastic/elastic_run.h) builds a new Trainer on the
// survivors, and reading the training set again was most of the time from the failure to
// the next step (0.5-1.5 s of 0.7-1.8 s for Fashion-MNIST on this project's 2-core
// machine). A hot spare loads them while it waits, so on being called in it only receives
// the state.
//
// A kept dataset is reused only while its files are the ones it was read from (device,
// inode, size and modification time of every shard); otherwise it is read again. Datasets
// are immutable (shared_ptr<const>), and Trainers follow one another, so sharing one is
// safe. Off by default: other commands read each file once.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "mirrored/data/dataset.h"

namespace mirrored::config {

// From now on, load_dataset() keeps what it loads for the rest of the process.
void keep_loaded_datasets();

using DatasetLoader = std::function<std::shared_ptr<const data::Dataset>()>;
// The dataset of `path` read with `cache_mb`: the kept one if its files are unchanged, else
// what `load` returns, kept (while datasets are kept) when its files did not change while
// it was read.
std::shared_ptr<const data::Dataset> load_or_reuse(const std::string& path, int64_t cache_mb, const DatasetLoader& load);

}  // namespace mirrored::config
