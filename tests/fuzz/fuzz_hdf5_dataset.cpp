// libFuzzer target: the HDF5 dataset validator (load_hdf5_dataset). The fuzz bytes
// describe a well-formed HDF5 file (which datasets exist, their element types, ranks,
// dimensions, values, chunking, the num_classes attribute and its type) that the target
// writes with libhdf5 and then loads: every file must be refused with mirrored::Error or
// give a Dataset that holds the invariants the trainer relies on. (fuzz_hdf5_file feeds
// raw bytes instead, which mostly tests libhdf5's own parser.)
#include <hdf5.h>

#include <cstring>
#include <vector>

#include "fuzz_input_file.h"
#include "mirrored/core/error.h"
#include "mirrored/data/hdf5_dataset.h"

namespace {

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }
  // Values for a dataset: the remaining bytes, cycled (zeros when there are none).
  std::vector<uint8_t> fill(size_t bytes) const {
    std::vector<uint8_t> out(bytes, 0);
    if (pos_ < size_)
      for (size_t i = 0; i < bytes; ++i) out[i] = data_[pos_ + i % (size_ - pos_)];
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

hid_t element_type(uint8_t choice) {
  switch (choice % 7) {
    case 0: return H5T_NATIVE_UINT8;
    case 1: return H5T_NATIVE_INT8;
    case 2: return H5T_NATIVE_INT16;
    case 3: return H5T_NATIVE_INT64;
    case 4: return H5T_NATIVE_UINT64;
    case 5: return H5T_NATIVE_FLOAT;
    default: return H5T_NATIVE_DOUBLE;
  }
}

void write_dataset(hid_t file, const char* name, Bytes& bytes) {
  const hid_t type = element_type(bytes.next());
  const int rank = bytes.next() % 5;
  hsize_t dims[4] = {};
  size_t numel = 1;
  for (int i = 0; i < rank; ++i) {
    dims[i] = bytes.next() % 9;  // small: the point is shapes and values, not size
    numel *= dims[i];
  }
  const bool chunked = (bytes.next() & 1) != 0 && rank > 0 && numel > 0;
  const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, nullptr);
  const hid_t props = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked) {
    hsize_t chunk[4];
    for (int i = 0; i < rank; ++i) chunk[i] = dims[i];
    H5Pset_chunk(props, rank, chunk);
    H5Pset_deflate(props, 1);
  }
  const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, props, H5P_DEFAULT);
  if (set >= 0 && numel > 0) {
    const std::vector<uint8_t> values = bytes.fill(numel * H5Tget_size(type));
    H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  }
  if (set >= 0) H5Dclose(set);
  H5Pclose(props);
  H5Sclose(space);
}

void write_num_classes(hid_t file, Bytes& bytes) {
  const uint8_t kind = bytes.next();
  const hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
  const hid_t space = H5Screate(H5S_SCALAR);
  if (kind % 3 == 0) {
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 4);
    const hid_t attribute = H5Acreate2(root, "num_classes", type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, type, "ten");
    H5Aclose(attribute);
    H5Tclose(type);
  } else {
    int64_t value = 0;
    for (int i = 0; i < 8; ++i) value = static_cast<int64_t>(static_cast<uint64_t>(value) << 8 | bytes.next());
    if (kind % 3 == 1) value %= 300;  // mostly near the valid range
    const hid_t attribute = H5Acreate2(root, "num_classes", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, H5T_NATIVE_INT64, &value);
    H5Aclose(attribute);
  }
  H5Sclose(space);
  H5Gclose(root);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes bytes(data, size);
  const uint8_t present = bytes.next();
  const std::string path = mirrored::fuzz::write_input(".h5", nullptr, 0);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) __builtin_trap();
  if (present & 1) write_dataset(file, "/images", bytes);
  if (present & 2) write_dataset(file, "/labels", bytes);
  if (present & 4) write_num_classes(file, bytes);
  H5Fclose(file);
  try {
    const mirrored::data::Dataset dataset = mirrored::data::load_hdf5_dataset(path);
    const bool consistent =
        dataset.size > 0 && dataset.sample_shape.size() == 3 && dataset.sample_numel() > 0 &&
        dataset.num_classes >= 2 && dataset.num_classes <= 256 &&
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
