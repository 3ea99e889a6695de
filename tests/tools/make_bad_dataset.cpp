// make_bad_dataset KIND OUT.h5
// Writes a small dataset file (28x28 images) with one specific defect, for the bad-input
// integration tests. KIND: missing_images, missing_labels, wrong_rank, length_mismatch,
// label_out_of_range, nan_image, float_labels, empty, tiny (10 valid samples), valid;
// token_beyond_vocab: a byte token file (1000 tokens) declaring a vocabulary of 64 whose
// token 500 is 200.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "mirrored/io/hdf5.h"

using mirrored::io::H5File;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_bad_dataset KIND OUT.h5\n");
    return 2;
  }
  const std::string kind = argv[1];
  int64_t n = kind == "empty" ? 0 : kind == "tiny" ? 10 : 200;
  std::vector<uint8_t> images(static_cast<size_t>(n * 28 * 28), 100);
  std::vector<uint8_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 10);
  try {
    H5File file(argv[2], H5File::Access::kTruncate);
    if (kind == "token_beyond_vocab") {
      std::vector<uint8_t> tokens(1000);
      for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint8_t>(i % 64);
      tokens[500] = 200;
      file.write_u8("/tokens", {1000}, tokens.data());
      file.write_attribute("tokenizer", std::string("bytes"));
      file.write_attribute("vocab_size", int64_t{64});
      return 0;
    }
    if (kind == "nan_image") {
      std::vector<float> pixels(images.begin(), images.end());
      pixels[28 * 28 * 17 + 5] = std::numeric_limits<float>::quiet_NaN();  // sample 17
      file.write_f32("/images", {n, 28, 28}, pixels.data());
    } else if (kind == "wrong_rank") {
      file.write_u8("/images", {n, 28 * 28}, images.data());
    } else if (kind != "missing_images") {
      file.write_u8("/images", {n, 28, 28}, images.data());
    }
    if (kind == "label_out_of_range") labels[42] = 12;
    if (kind == "length_mismatch") {
      file.write_u8("/labels", {n - 1}, labels.data());
    } else if (kind == "float_labels") {
      std::vector<float> values(labels.begin(), labels.end());
      file.write_f32("/labels", {n}, values.data());
    } else if (kind != "missing_labels") {
      file.write_u8("/labels", {n}, labels.data());
    }
    file.write_attribute("num_classes", int64_t{10});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_bad_dataset: %s\n", e.what());
    return 1;
  }
  return 0;
}
