#include "mirrored/data/token_file.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "checked_token_file.h"
#include "hdf5_rows.h"
#include "mirrored/data/block_cache.h"
#include "mirrored/io/hdf5.h"

namespace mirrored::data {
namespace {

constexpr const char* kVocabSize = "vocab_size";
constexpr const char* kTokenizer = "tokenizer";
constexpr const char* kSource = "source";
constexpr const char* kTokenizerModel = "tokenizer_model";
constexpr const char* kSentencePiece = "sentencepiece";  // data/tokenizer.h's name
constexpr const char* kTokenizerSha256 = "tokenizer_sha256";
// Tokens checked per read in open_token_file: bounded memory whatever the file's size.
constexpr int64_t kScanTokens = int64_t{1} << 20;

InputError problem(const std::string& path, const std::string& what) {
  return InputError(str_cat("'", path, "': ", what));
}

// Throws Error(kFailure) "HDF5 <call> failed on '<path>' /tokens" when `status` < 0.
int64_t h5_ok(int64_t status, const char* call, const std::string& path) {
  if (status < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw Error(ExitCode::kFailure, str_cat("HDF5 ", call, " failed on '", path, "' ", kTokensDataset));
  }
  return status;
}

io::H5File open_file(const std::string& path) {
  try {
    return io::H5File(path, io::H5File::Access::kRead);
  } catch (const InputError& e) {
    throw InputError(str_cat(e.what(), " (expected a token file with ", kTokensDataset, ")"));
  }
}

std::string describe_type(hid_t type) {
  const H5T_class_t type_class = H5Tget_class(type);
  const size_t bits = H5Tget_size(type) * 8;
  if (type_class == H5T_INTEGER) return str_cat(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", bits);
  if (type_class == H5T_FLOAT) return str_cat("float", bits);
  if (type_class == H5T_STRING) return "string";
  return "non-numeric";
}

// 1 or 2 for uint8 / uint16 storage; the chunk length (0 when contiguous) into `chunk`.
int token_width(const io::H5File& file, int64_t& chunk) {
  const std::string& path = file.path();
  const io::H5Handle set(static_cast<hid_t>(h5_ok(H5Dopen2(file.id(), kTokensDataset, H5P_DEFAULT), "H5Dopen2", path)),
                         H5Dclose);
  const io::H5Handle type(static_cast<hid_t>(h5_ok(H5Dget_type(set.get()), "H5Dget_type", path)), H5Tclose);
  const bool is_unsigned = H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_NONE;
  const size_t size = H5Tget_size(type.get());
  if (!is_unsigned || (size != 1 && size != 2)) {
    throw problem(path, str_cat(kTokensDataset, " holds ", describe_type(type.get()),
                                " values, expected uint8 or uint16 tokens"));
  }
  const io::H5Handle create(static_cast<hid_t>(h5_ok(H5Dget_create_plist(set.get()), "H5Dget_create_plist", path)),
                            H5Pclose);
  chunk = 0;
  if (H5Pget_layout(create.get()) == H5D_CHUNKED) {
    hsize_t dims = 0;
    if (H5Pget_chunk(create.get(), 1, &dims) == 1) chunk = static_cast<int64_t>(dims);
  }
  return static_cast<int>(size);
}

int64_t read_vocab_size(const io::H5File& file, int token_bytes) {
  const std::string& path = file.path();
  if (!file.has_attribute(kVocabSize)) {
    throw problem(path, str_cat("attribute ", kVocabSize, " is missing (expected the vocabulary size, ",
                                kByteVocabulary, " for byte tokens)"));
  }
  const int64_t vocab = file.read_int_attribute(kVocabSize);
  const int64_t limit = token_bytes == 1 ? kByteVocabulary : kMaxVocabulary;
  if (vocab < 1 || vocab > kMaxVocabulary) {
    throw problem(path, str_cat("attribute ", kVocabSize, " = ", vocab, ", expected 1 to ", kMaxVocabulary));
  }
  // A byte file cannot hold token 256 or above; a larger vocabulary there is a mislabel.
  if (vocab > limit) {
    throw problem(path, str_cat("attribute ", kVocabSize, " = ", vocab, " but ", kTokensDataset,
                                " is uint8, which holds tokens below ", limit, "; expected uint16 storage"));
  }
  return vocab;
}

}  // namespace

std::string describe_tokenizer(const TokenFileInfo& info) {
  if (info.tokenizer_model.empty()) return info.tokenizer;
  return str_cat(info.tokenizer, " (", info.tokenizer_model, ", sha256 ", info.tokenizer_sha256.substr(0, 12), "...)");
}

bool same_tokenizer(const TokenFileInfo& a, const TokenFileInfo& b) {
  return a.tokenizer == b.tokenizer && a.tokenizer_sha256 == b.tokenizer_sha256;
}

std::vector<int64_t> read_token_byte_lengths(const TokenFileInfo& info) {
  if (info.tokenizer == kByteTokenizer) return std::vector<int64_t>(static_cast<size_t>(info.vocab_size), 1);
  const io::H5File file = open_file(info.path);
  if (!file.exists(kTokenBytesDataset) && info.tokenizer != kSentencePiece)
    return std::vector<int64_t>(static_cast<size_t>(info.vocab_size), 1);
  if (!file.exists(kTokenBytesDataset))
    throw problem(info.path, str_cat("dataset ", kTokenBytesDataset, " is missing (expected the bytes each of the ",
                                     info.vocab_size, " tokens of tokenizer ", info.tokenizer, " decodes to)"));
  const std::vector<int64_t> shape = file.shape(kTokenBytesDataset);
  if (shape != std::vector<int64_t>{info.vocab_size})
    throw problem(info.path, str_cat(kTokenBytesDataset, " has shape ", shape_str(shape), ", expected [", info.vocab_size,
                                     "] (attribute ", kVocabSize, ")"));
  std::vector<int64_t> lengths = file.read_i64(kTokenBytesDataset);
  for (size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 0)
      throw problem(info.path, str_cat(kTokenBytesDataset, "[", i, "] = ", lengths[i], ", expected a byte count >= 0"));
  return lengths;
}

bool is_token_file(const std::string& path) { return open_file(path).exists(kTokensDataset); }

namespace {

// The tokenizer model must be a file of the token file's own folder: a name, not a path.
void check_model_name(const std::string& path, const std::string& model) {
  if (model.empty() || model == "." || model == ".." || model.find('/') != std::string::npos ||
      model.find('\0') != std::string::npos)
    throw problem(path, str_cat("attribute ", kTokenizerModel, " = '", model,
                                "': expected the name of a file in the token file's own folder (no '/', not '.' or "
                                "'..')"));
}

TokenFileInfo describe_open_file(const io::H5File& file) {
  const std::string& path = file.path();
  if (!file.exists(kTokensDataset)) {
    throw problem(path, str_cat("dataset ", kTokensDataset, " is missing (expected uint8 or uint16 tokens [N])"));
  }
  TokenFileInfo info;
  info.path = path;
  const std::vector<int64_t> shape = file.shape(kTokensDataset);
  if (shape.size() != 1) {
    throw problem(path, str_cat(kTokensDataset, " has shape ", shape_str(shape), ", expected [N]"));
  }
  info.num_tokens = shape[0];
  info.token_bytes = token_width(file, info.chunk_tokens);
  if (info.num_tokens == 0) throw problem(path, str_cat(kTokensDataset, " holds 0 tokens, expected at least one"));
  info.vocab_size = read_vocab_size(file, info.token_bytes);
  if (!file.has_attribute(kTokenizer)) {
    throw problem(path, str_cat("attribute ", kTokenizer, " is missing (expected the tokenizer's name, e.g. \"",
                                kByteTokenizer, "\")"));
  }
  info.tokenizer = file.read_string_attribute(kTokenizer);
  if (file.has_attribute(kSource)) info.source = file.read_string_attribute(kSource);
  // A SentencePiece file names its model; files of tokenizers mirrored does not apply
  // itself (written by other tools) may.
  if (info.tokenizer == kSentencePiece) {
    for (const char* name : {kTokenizerModel, kTokenizerSha256})
      if (!file.has_attribute(name))
        throw problem(path, str_cat("attribute ", name, " is missing (expected it with ", kTokenizer, " = \"",
                                    info.tokenizer, "\": the tokenizer model's file name and SHA-256)"));
  }
  if (file.has_attribute(kTokenizerModel)) {
    info.tokenizer_model = file.read_string_attribute(kTokenizerModel);
    check_model_name(path, info.tokenizer_model);
  }
  if (file.has_attribute(kTokenizerSha256)) info.tokenizer_sha256 = file.read_string_attribute(kTokenizerSha256);
  return info;
}

// Every token within the vocabulary, read through `rows`, in bounded memory.
void check_tokens(const TokenFileInfo& info, const std::shared_ptr<const detail::Hdf5Rows>& rows) {
  // uint8 storage with the full byte vocabulary cannot hold a bad token: no pass needed.
  if (info.token_bytes == 1 && info.vocab_size == kByteVocabulary) return;
  const BlockSource tokens = detail::row_blocks(rows, detail::native_unsigned(info.token_bytes), kScanTokens);
  for_each_block(tokens, [&](const Block& block) {
    for (int64_t i = 0; i < block.items(); ++i) {
      const int64_t token = info.token_bytes == 1 ? int64_t{block.as<uint8_t>()[i]} : int64_t{block.as<uint16_t>()[i]};
      if (token >= info.vocab_size) {
        throw problem(info.path, str_cat(kTokensDataset, "[", block.first_item() + i, "] = ", token,
                                         " is outside the vocabulary [0, ", info.vocab_size, ") (attribute ",
                                         kVocabSize, " = ", info.vocab_size, ")"));
      }
    }
  });
}

}  // namespace

TokenFileInfo describe_token_file(const std::string& path) { return describe_open_file(open_file(path)); }

std::shared_ptr<const detail::Hdf5Rows> detail::open_checked_token_file(const std::string& path, TokenFileInfo& info) {
  io::H5File file = open_file(path);
  info = describe_open_file(file);
  auto rows = std::make_shared<const Hdf5Rows>(std::move(file), kTokensDataset, "");
  check_tokens(info, rows);
  return rows;
}

TokenFileInfo open_token_file(const std::string& path) {
  TokenFileInfo info;
  detail::open_checked_token_file(path, info);
  return info;
}

namespace {

// Creates /tokens [count] in `file` with `token_bytes`-wide unsigned storage (the io
// layer's H5File writes uint8 only) and writes `data` (host byte order).
void write_tokens_dataset(io::H5File& file, const void* data, int64_t count, int token_bytes) {
  const std::string& path = file.path();
  const hsize_t length = static_cast<hsize_t>(count);
  const io::H5Handle space(static_cast<hid_t>(h5_ok(H5Screate_simple(1, &length, nullptr), "H5Screate_simple", path)),
                           H5Sclose);
  const hid_t stored_type = token_bytes == 1 ? H5T_STD_U8LE : H5T_STD_U16LE;
  const io::H5Handle tokens(static_cast<hid_t>(h5_ok(H5Dcreate2(file.id(), kTokensDataset, stored_type, space.get(),
                                                                H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                                     "H5Dcreate2", path)),
                            H5Dclose);
  if (count > 0) {
    h5_ok(H5Dwrite(tokens.get(), detail::native_unsigned(token_bytes), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dwrite",
          path);
  }
}

void write_tokens(const std::string& path, const void* data, int64_t count, int token_bytes,
                  const TokenFileAttributes& attributes) {
  MIRRORED_CHECK(attributes.vocab_size >= 1 && attributes.vocab_size <= (token_bytes == 1 ? kByteVocabulary : kMaxVocabulary),
                 "vocab_size ", attributes.vocab_size, " for ", token_bytes, "-byte tokens");
  io::write_hdf5_file(path, [&](io::H5File& file) {
    write_tokens_dataset(file, data, count, token_bytes);
    file.write_attribute(kTokenizer, attributes.tokenizer);
    file.write_attribute(kVocabSize, attributes.vocab_size);
    if (!attributes.source.empty()) file.write_attribute(kSource, attributes.source);
    if (!attributes.tokenizer_model.empty()) file.write_attribute(kTokenizerModel, attributes.tokenizer_model);
    if (!attributes.tokenizer_sha256.empty()) file.write_attribute(kTokenizerSha256, attributes.tokenizer_sha256);
    if (!attributes.token_bytes.empty()) {
      MIRRORED_CHECK(static_cast<int64_t>(attributes.token_bytes.size()) == attributes.vocab_size, "token_bytes of ",
                     attributes.token_bytes.size(), " tokens for vocab_size ", attributes.vocab_size);
      file.write_i64(kTokenBytesDataset, {attributes.vocab_size}, attributes.token_bytes.data());
    }
  });
}

}  // namespace

void write_token_file(const std::string& path, std::span<const uint8_t> bytes, const TokenFileAttributes& attributes) {
  write_tokens(path, bytes.data(), static_cast<int64_t>(bytes.size()), 1, attributes);
}

void write_token_file(const std::string& path, std::span<const uint16_t> tokens, const TokenFileAttributes& attributes) {
  write_tokens(path, tokens.data(), static_cast<int64_t>(tokens.size()), 2, attributes);
}

}  // namespace mirrored::data
