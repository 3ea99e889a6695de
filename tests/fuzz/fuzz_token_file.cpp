// libFuzzer target: the token file validator (data::open_token_file, data::TokenDataset).
// The fuzz bytes describe a well-formed HDF5 file (the /tokens dataset's element type, rank,
// length and values; the vocab_size, tokenizer, tokenizer_model and tokenizer_sha256
// attributes, their types and text; /token_bytes), which the target writes with libhdf5 and
// opens: every file must be refused with an InputError, or give tokens all within the
// vocabulary and a tokenizer_model that is a plain file name. (Raw bytes would mostly test
// libhdf5's own parser, as fuzz_hdf5_file does.)
#include <hdf5.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_input_file.h"
#include "mirrored/core/error.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"

namespace {

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string text(size_t most) {
    std::string out;
    for (size_t n = next() % (most + 1); n > 0; --n) out.push_back(static_cast<char>(next()));
    return out;
  }
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
  switch (choice % 5) {
    case 0: return H5T_NATIVE_UINT8;
    case 1: return H5T_NATIVE_UINT16;
    case 2: return H5T_NATIVE_INT16;
    case 3: return H5T_NATIVE_UINT32;
    default: return H5T_NATIVE_FLOAT;
  }
}

void write_dataset(hid_t file, const char* name, hid_t type, Bytes& bytes) {
  const int rank = bytes.next() % 3;
  hsize_t dims[2] = {};
  size_t numel = 1;
  for (int i = 0; i < rank; ++i) numel *= (dims[i] = bytes.next() % 200);
  const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, nullptr);
  const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (set >= 0 && numel > 0) {
    const std::vector<uint8_t> values = bytes.fill(numel * H5Tget_size(type));
    H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  }
  if (set >= 0) H5Dclose(set);
  H5Sclose(space);
}

void write_string(hid_t root, const char* name, const std::string& value) {
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size() + 1);
  const hid_t attribute = H5Acreate2(root, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, type, value.c_str());
  H5Aclose(attribute);
  H5Tclose(type);
  H5Sclose(space);
}

void write_integer(hid_t root, const char* name, int64_t value) {
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attribute = H5Acreate2(root, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, H5T_NATIVE_INT64, &value);
  H5Aclose(attribute);
  H5Sclose(space);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mirrored;
  Bytes bytes(data, size);
  const uint8_t present = bytes.next();
  const std::string path = fuzz::write_input(".h5", nullptr, 0);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) __builtin_trap();
  const hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
  if (present & 1) write_dataset(file, "/tokens", element_type(bytes.next()), bytes);
  if (present & 2) write_integer(root, "vocab_size", (static_cast<int64_t>(bytes.next()) << 8 | bytes.next()) - 16);
  if (present & 4) write_string(root, "tokenizer", (bytes.next() & 1) ? "sentencepiece" : bytes.text(16));
  if (present & 8) write_string(root, "tokenizer_model", bytes.text(24));
  if (present & 16) write_string(root, "tokenizer_sha256", bytes.text(64));
  if (present & 32) write_dataset(file, "/token_bytes", H5T_NATIVE_INT64, bytes);
  H5Gclose(root);
  H5Fclose(file);
  try {
    data::TokenDataset tokens(path);
    const data::TokenFileInfo& info = tokens.info();
    if (info.tokenizer_model.find('/') != std::string::npos || info.tokenizer_model == "..") __builtin_trap();
    std::vector<int32_t> window(static_cast<size_t>(std::min<int64_t>(info.num_tokens, 64)));
    tokens.read(0, static_cast<int64_t>(window.size()), window.data());
    for (const int32_t token : window)
      if (token < 0 || token >= info.vocab_size) __builtin_trap();
    data::read_token_byte_lengths(info);
  } catch (const InputError&) {
  }
  return 0;
}
