// mirrored data inspect FILE: what an HDF5 dataset file holds (every dataset with its
// shape and element type, the root attributes the loader reads) and, once it validates
// as a training set, the sample shape and the label histogram; for a token file (/tokens),
// the token count, vocabulary, tokenizer, the first tokens and the most frequent ones.
#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

#include "commands.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/data/shard_list.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/io/hdf5.h"

namespace mirrored::cli {
namespace {

std::string type_name(hid_t type) {
  const H5T_class_t type_class = H5Tget_class(type);
  const size_t bits = H5Tget_size(type) * 8;
  if (type_class == H5T_INTEGER) return str_cat(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", bits);
  if (type_class == H5T_FLOAT) return str_cat("float", bits);
  if (type_class == H5T_STRING) return "string";
  return str_cat("class ", static_cast<int>(type_class), ", ", bits, " bits");
}

struct DatasetRow {
  std::string path, type, shape;
};

// A link visitor (H5Lvisit's signature is the same across HDF5 1.10 and 1.12+, unlike
// H5Ovisit's); the object type comes from opening it.
herr_t collect(hid_t root, const char* name, const H5L_info_t*, void* rows_ptr) {
  auto& rows = *static_cast<std::vector<DatasetRow>*>(rows_ptr);
  const hid_t object = H5Oopen(root, name, H5P_DEFAULT);
  if (object < 0) return 0;  // a dangling soft link: nothing to list
  if (H5Iget_type(object) != H5I_DATASET) {
    H5Oclose(object);
    return 0;
  }
  const hid_t dataset = object;
  const hid_t type = H5Dget_type(dataset);
  const hid_t space = H5Dget_space(dataset);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  rows.push_back({str_cat("/", name), type_name(type), str_cat("[", join(dims, ", "), "]")});
  H5Sclose(space);
  H5Tclose(type);
  H5Oclose(dataset);
  return 0;
}

constexpr int64_t kFirstTokens = 64;
constexpr size_t kMostFrequent = 10;
constexpr int64_t kScanTokens = int64_t{1} << 20;
constexpr int64_t kScanCacheBytes = int64_t{16} << 20;

// A byte token as text would show it: printable ASCII as itself, the rest escaped.
std::string byte_text(int32_t token) {
  if (token == '\\') return "\\\\";
  if (token == '"') return "\\\"";
  if (token == '\n') return "\\n";
  if (token == '\t') return "\\t";
  if (token >= 0x20 && token < 0x7F) return std::string(1, static_cast<char>(token));
  char escaped[8];
  std::snprintf(escaped, sizeof(escaped), "\\x%02X", static_cast<unsigned>(token) & 0xFFu);
  return escaped;
}

void inspect_tokens(const std::string& path) {
  // Validates every token against the vocabulary (an InputError names the first bad one),
  // then reads the file once through a small cache: any size of file fits.
  data::TokenCacheOptions options;
  options.cache_bytes = kScanCacheBytes;
  options.prefetch = false;
  data::TokenDataset tokens(path, options);
  const data::TokenFileInfo& info = tokens.info();
  const bool bytes = info.tokenizer == data::kByteTokenizer;
  chief_print(str_cat("tokens       ", info.num_tokens));
  chief_print(str_cat("vocab_size   ", info.vocab_size));
  chief_print(str_cat("tokenizer    ", info.tokenizer));
  if (!info.tokenizer_model.empty()) chief_print(str_cat("model        ", info.tokenizer_model, " (next to the file)"));
  if (!info.tokenizer_sha256.empty()) chief_print(str_cat("sha256       ", info.tokenizer_sha256));
  if (!info.source.empty()) chief_print(str_cat("source       ", info.source));
  chief_print(str_cat("storage      uint", 8 * info.token_bytes, ", ",
                      info.chunk_tokens > 0 ? str_cat("chunks of ", info.chunk_tokens, " tokens") : "contiguous"));

  std::vector<int32_t> piece(static_cast<size_t>(std::min(info.num_tokens, kScanTokens)));
  std::vector<int64_t> counts(static_cast<size_t>(info.vocab_size), 0);
  std::string first;
  for (int64_t offset = 0; offset < info.num_tokens; offset += kScanTokens) {
    const int64_t count = std::min(kScanTokens, info.num_tokens - offset);
    tokens.read(offset, count, piece.data());
    for (int64_t i = 0; i < count; ++i) ++counts[static_cast<size_t>(piece[static_cast<size_t>(i)])];
    if (offset == 0) {
      for (int64_t i = 0; i < std::min(count, kFirstTokens); ++i) {
        const int32_t token = piece[static_cast<size_t>(i)];
        first += bytes ? byte_text(token) : str_cat(i > 0 ? " " : "", token);
      }
    }
  }
  chief_print(str_cat("first ", std::min(info.num_tokens, kFirstTokens), (bytes ? " bytes  \"" : " tokens  "), first,
                      bytes ? "\"" : ""));
  const auto distinct = std::count_if(counts.begin(), counts.end(), [](int64_t c) { return c > 0; });
  chief_print(str_cat("distinct     ", distinct, " of ", info.vocab_size));

  std::vector<int32_t> order(counts.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t shown = std::min(kMostFrequent, static_cast<size_t>(distinct));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](int32_t a, int32_t b) { return counts[a] != counts[b] ? counts[a] > counts[b] : a < b; });
  chief_print("token  count     fraction");
  for (size_t k = 0; k < shown; ++k) {
    const int32_t token = order[k];
    const std::string name = bytes ? str_cat(token, " '", byte_text(token), "'") : str_cat(token);
    char line[96];
    std::snprintf(line, sizeof(line), "%-12s %-9lld %.4f", name.c_str(), static_cast<long long>(counts[token]),
                  static_cast<double>(counts[token]) / static_cast<double>(info.num_tokens));
    chief_print(line);
  }
}

}  // namespace

int data_inspect_command(const Args& args) {
  if (args.size() != 1 || args[0] == "--help" || args[0] == "-h") {
    std::puts("usage: mirrored data inspect FILE.h5");
    return args.size() == 1 ? 0 : static_cast<int>(ExitCode::kUsage);
  }
  // A list or glob of shards (shard_list.h): the first file's layout, then the set as one.
  const std::string& path = args[0];
  const std::vector<std::string> shards = data::expand_shards(path);
  std::vector<DatasetRow> rows;
  {
    const io::H5File file(shards.front(), io::H5File::Access::kRead);  // InputError for a missing or non-HDF5 file
    if (H5Lvisit(file.id(), H5_INDEX_NAME, H5_ITER_NATIVE, collect, &rows) < 0)
      throw InputError(str_cat("'", shards.front(), "': cannot list its datasets"));
  }
  chief_print(str_cat("file ", shards.front()));
  for (const auto& row : rows) chief_print(str_cat("  ", row.path, "  ", row.type, "  ", row.shape));
  if (shards.size() > 1) chief_print(str_cat("shards       ", shards.size(), " (", shards.front(), " to ", shards.back(), ")"));

  if (data::is_token_file(shards.front())) {
    inspect_tokens(path);
    return 0;
  }
  // Full validation: the same checks `mirrored train` applies (an InputError names the problem).
  const data::Dataset dataset = data::load_hdf5_dataset(path);
  std::vector<int64_t> counts(static_cast<size_t>(dataset.num_classes), 0);
  for (const uint8_t label : dataset.labels) ++counts[label];
  chief_print(str_cat("samples      ", dataset.size));
  chief_print(str_cat("sample shape ", shape_str(dataset.sample_shape), " (C, H, W)"));
  chief_print(str_cat("num_classes  ", dataset.num_classes));
  chief_print(str_cat("pixels       ", dataset.float_images.empty() ? "uint8" : "float32", ", model input = pixel ",
                      dataset.pixel_scale ? str_cat("* ", *dataset.pixel_scale, " (pixel_scale)") : std::string("/ 255")));
  chief_print(dataset.class_names.empty() ? "label  count  fraction" : "label  count  fraction  class");
  for (size_t c = 0; c < counts.size(); ++c) {
    char line[64];
    std::snprintf(line, sizeof(line), "%-5zu  %-5lld  %.4f", c, static_cast<long long>(counts[c]),
                  static_cast<double>(counts[c]) / static_cast<double>(std::max<int64_t>(dataset.size, 1)));
    chief_print(dataset.class_names.empty() ? std::string(line) : str_cat(line, "    ", dataset.class_names[c]));
  }
  return 0;
}

}  // namespace mirrored::cli
