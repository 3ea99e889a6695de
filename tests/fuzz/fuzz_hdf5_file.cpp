// libFuzzer target, run by hand (not in CI): load_hdf5_dataset on arbitrary file bytes.
// This mostly exercises libhdf5's own parser, and HDF5 1.10.8 has memory errors on damaged
// metadata that our code cannot fix (a heap-buffer-overflow under H5Aexists was found in
// seconds); fuzz_hdf5_dataset covers our validator in CI. It did find one of ours: a
// chunked dataset whose extent claims far more data than the file holds (fixed in
// io/hdf5.cpp, seed corpus/hdf5_file/oom_declared_extent.h5).
// A file it accepts must satisfy the Dataset invariants the trainer relies on.
#include "fuzz_input_file.h"
#include "mirrored/core/error.h"
#include "mirrored/data/hdf5_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mirrored::fuzz::write_input(".h5", data, size);
  try {
    const mirrored::data::Dataset dataset = mirrored::data::load_hdf5_dataset(path);
    const bool consistent =
        dataset.size > 0 && dataset.sample_shape.size() == 3 && dataset.sample_numel() > 0 &&
        // uint8 pixels or float32 ones, never both
        static_cast<int64_t>(dataset.images.size() + dataset.float_images.size()) ==
            dataset.size * dataset.sample_numel() &&
        (dataset.images.empty() || dataset.float_images.empty()) &&
        static_cast<int64_t>(dataset.labels.size()) == dataset.size;
    if (!consistent) __builtin_trap();
    for (uint8_t label : dataset.labels)
      if (label >= dataset.num_classes) __builtin_trap();
  } catch (const mirrored::Error&) {
  }
  return 0;
}
