#include "mirrored/data/hdf5_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "mirrored/data/image_cache.h"
#include "mirrored/data/shard_list.h"
#include "mirrored/io/hdf5.h"
#include "mirrored/io/json_text.h"
#include "pixel_checks.h"

namespace mirrored::data {
namespace {

constexpr const char* kImages = "/images";
constexpr const char* kLabels = "/labels";
constexpr int kDefaultClasses = 10;
constexpr int kMaxClasses = 256;  // labels are stored as uint8

const char* class_name(H5T_class_t type_class) {
  switch (type_class) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    default: return "non-numeric";
  }
}

InputError problem(const std::string& path, const std::string& what) {
  return InputError(str_cat("'", path, "': ", what));
}

io::H5File open_dataset_file(const std::string& path) {
  try {
    return io::H5File(path, io::H5File::Access::kRead);
  } catch (const InputError& e) {
    throw InputError(str_cat(e.what(), " (expected a dataset file with /images and /labels)"));
  }
}

void require(const io::H5File& file, const char* dataset, const char* expected) {
  if (!file.exists(dataset)) {
    throw problem(file.path(), str_cat("dataset ", dataset, " is missing (expected ", expected, ")"));
  }
}

bool stored_as_bytes(const io::H5File& file, const char* dataset) {
  const io::H5Handle set(H5Dopen2(file.id(), dataset, H5P_DEFAULT), H5Dclose);
  if (!set.valid()) return false;
  const io::H5Handle type(H5Dget_type(set.get()), H5Tclose);
  return type.valid() && H5Tget_size(type.get()) == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE;
}

// Wider or signed integer pixels are range-checked, because HDF5's conversion to uint8
// would silently clamp 300 to 255.
std::vector<uint8_t> integer_pixels(const io::H5File& file, int64_t sample_numel) {
  if (stored_as_bytes(file, kImages)) return file.read_u8(kImages);
  const std::vector<int64_t> wide = file.read_i64(kImages);
  std::vector<uint8_t> pixels(wide.size());
  detail::narrow_integer_pixels(wide.data(), static_cast<int64_t>(wide.size()), 0, sample_numel, file.path(),
                                pixels.data());
  return pixels;
}

// Float pixels are kept as stored. With the root attribute pixel_scale they may be any
// finite values (the scale says what they mean); without it they are pixel values in
// [0, 255] divided by 255 like bytes, so an export from a tool that widened uint8 trains as
// the uint8 file would, and data normalised to [0, 1] is refused rather than divided again.
std::vector<float> float_pixels(const io::H5File& file, int64_t sample_numel, bool scaled) {
  std::vector<float> values = file.read_f32(kImages);
  detail::FloatPixelCheck check(file.path(), sample_numel, scaled);
  check.check(values.data(), static_cast<int64_t>(values.size()), 0);
  check.finish();
  return values;
}

// A set larger than the budget: its pixels stay on disk behind a block cache. They are
// checked once here, block by block, as the whole-file reader checks them, so both refuse
// the same files with the same messages (integer pixels are range-checked by the reads).
std::shared_ptr<ImageCache> cached_pixels(std::vector<ImageShard> shards, int64_t sample_numel, bool floats,
                                          bool scaled, int64_t cache_bytes) {
  auto cache = std::make_shared<ImageCache>(std::move(shards), sample_numel, floats,
                                            ImageCacheOptions{.cache_bytes = cache_bytes});
  if (floats) {
    std::optional<detail::FloatPixelCheck> check;  // one per shard: positions count from its first pixel
    std::string checking;
    cache->scan([&](const Block& block, int64_t, const std::string& path) {
      if (!check || path != checking) {
        if (check) check->finish();
        check.emplace(path, sample_numel, scaled);
        checking = path;
      }
      check->check(block.as<float>(), block.items() * sample_numel, block.first_item() * sample_numel);
    });
    check->finish();
  } else {
    cache->scan([](const Block&, int64_t, const std::string&) {});
  }
  return cache;
}

// The root attribute pixel_scale: model input = pixel * pixel_scale (default pixel / 255).
std::optional<float> read_pixel_scale(const io::H5File& file) {
  if (!file.has_attribute("pixel_scale")) return std::nullopt;
  const double scale = file.read_real_attribute("pixel_scale");
  if (!std::isfinite(scale) || scale <= 0.0 || scale > 1e30)
    throw problem(file.path(), str_cat("attribute pixel_scale = ", scale, ", expected a positive finite number "
                                       "(model input = pixel * pixel_scale)"));
  return static_cast<float>(scale);
}

int read_num_classes(const io::H5File& file) {
  if (!file.has_attribute("num_classes")) return kDefaultClasses;
  const int64_t n = file.read_int_attribute("num_classes");
  if (n < 2 || n > kMaxClasses) {
    throw problem(file.path(), str_cat("attribute num_classes = ", n, ", expected 2 to ",
                                       kMaxClasses));
  }
  return static_cast<int>(n);
}

// The root attribute class_names: a JSON array of num_classes strings (absent: no names).
std::vector<std::string> read_class_names(const io::H5File& file, int num_classes) {
  if (!file.has_attribute("class_names")) return {};
  const std::string text = file.read_string_attribute("class_names");
  io::JsonCursor json(text, [&](size_t position, const std::string& expected) {
    return problem(file.path(), str_cat("attribute class_names at character ", position, ": expected ", expected,
                                        " (a JSON array of the class names)"))
        .what();
  });
  std::vector<std::string> names;
  json.expect('[');
  if (!json.consume(']')) {
    do names.push_back(json.string());
    while (json.consume(','));
    json.expect(']');
  }
  json.skip_space();
  if (!json.at_end()) json.fail("the end of the array");
  if (static_cast<int>(names.size()) != num_classes)
    throw problem(file.path(), str_cat("attribute class_names holds ", names.size(), " names for num_classes ",
                                       num_classes, "; expected one name a class"));
  return names;
}

// `names` as a JSON array of strings (control characters escaped as \u00XX).
std::string class_names_json(const std::vector<std::string>& names) {
  std::string out = "[";
  for (const std::string& name : names) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (const char c : name) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
        out += escaped;
      } else {
        out += c;
      }
    }
    out += '"';
  }
  return out + "]";
}

std::vector<uint8_t> read_labels(const io::H5File& file, int num_classes) {
  const std::vector<int64_t> wide = file.read_i64(kLabels);
  std::vector<uint8_t> labels(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < 0 || wide[i] >= num_classes) {
      throw problem(file.path(), str_cat(kLabels, "[", i, "] = ", wide[i], " is outside [0, ",
                                         num_classes, ") (num_classes ", num_classes, ")"));
    }
    labels[i] = static_cast<uint8_t>(wide[i]);
  }
  return labels;
}

// What one file holds, checked, but for its pixels.
struct FileHeader {
  Dataset dataset;  // everything but the pixels
  bool floats = false;
};

FileHeader read_header(const io::H5File& file) {
  const std::string& path = file.path();
  require(file, kImages, "uint8 or float32 images [N, H, W] or [N, C, H, W]");
  require(file, kLabels, "integer labels [N]");

  const Shape image_shape = file.shape(kImages);
  if (image_shape.size() != 3 && image_shape.size() != 4) {
    throw problem(path, str_cat(kImages, " has shape ", shape_str(image_shape),
                                ", expected [N, H, W] or [N, C, H, W]"));
  }
  const Shape label_shape = file.shape(kLabels);
  if (label_shape.size() != 1) {
    throw problem(path, str_cat(kLabels, " has shape ", shape_str(label_shape), ", expected [N]"));
  }
  if (image_shape[0] != label_shape[0]) {
    throw problem(path, str_cat(kImages, " holds ", image_shape[0], " samples but ", kLabels,
                                " holds ", label_shape[0], "; expected equal lengths"));
  }
  if (image_shape[0] == 0) {
    throw problem(path, str_cat("dataset is empty: ", kImages, " and ", kLabels, " hold 0 samples"));
  }

  FileHeader header;
  Dataset& dataset = header.dataset;
  dataset.source = path;
  dataset.size = image_shape[0];
  dataset.sample_shape = image_shape.size() == 3
                             ? Shape{1, image_shape[1], image_shape[2]}
                             : Shape{image_shape[1], image_shape[2], image_shape[3]};
  if (dataset.sample_numel() == 0) {
    throw problem(path, str_cat(kImages, " has shape ", shape_str(image_shape),
                                ", expected non-empty samples"));
  }

  const H5T_class_t label_class = file.type_class(kLabels);
  if (label_class != H5T_INTEGER) {
    throw problem(path, str_cat(kLabels, " holds ", class_name(label_class),
                                " values, expected integers"));
  }
  dataset.num_classes = read_num_classes(file);
  dataset.labels = read_labels(file, dataset.num_classes);
  dataset.class_names = read_class_names(file, dataset.num_classes);

  dataset.pixel_scale = read_pixel_scale(file);
  const H5T_class_t image_class = file.type_class(kImages);
  if (image_class != H5T_INTEGER && image_class != H5T_FLOAT) {
    throw problem(path, str_cat(kImages, " holds ", class_name(image_class),
                                " values, expected uint8 or float32 pixels"));
  }
  header.floats = image_class == H5T_FLOAT;
  return header;
}

std::string scale_str(const std::optional<float>& scale) {
  return scale ? str_cat(*scale) : std::string("absent (pixel / 255)");
}

// The shards of one set agree on everything a batch depends on but the samples; else an
// InputError naming the shard, the field, and what the first shard holds.
void check_agrees(const FileHeader& first, const FileHeader& shard) {
  const Dataset& a = first.dataset;
  const Dataset& b = shard.dataset;
  const auto differs = [&](const std::string& field, const std::string& here, const std::string& there) {
    return problem(b.source, str_cat(field, " is ", here, " but the first shard '", a.source, "' has ", there,
                                     "; the shards of one dataset must agree"));
  };
  if (b.sample_shape != a.sample_shape)
    throw differs(str_cat(kImages, " sample shape [C, H, W]"), shape_str(b.sample_shape), shape_str(a.sample_shape));
  if (shard.floats != first.floats)
    throw differs(str_cat(kImages, " type"), shard.floats ? "float" : "integer", first.floats ? "float" : "integer");
  if (b.num_classes != a.num_classes)
    throw differs("attribute num_classes", str_cat(b.num_classes), str_cat(a.num_classes));
  if (b.pixel_scale != a.pixel_scale)
    throw differs("attribute pixel_scale", scale_str(b.pixel_scale), scale_str(a.pixel_scale));
}

template <typename T>
void append(std::vector<T>& to, std::vector<T> more) {
  if (to.empty()) to = std::move(more);
  else to.insert(to.end(), more.begin(), more.end());
}

}  // namespace

Dataset load_hdf5_dataset(const std::string& path, int64_t cache_bytes) {
  MIRRORED_CHECK(cache_bytes >= 0, "cache_bytes ", cache_bytes);
  const std::vector<std::string> paths = expand_shards(path);
  // Every shard's header first: whether the set is cached depends on all of them.
  std::vector<FileHeader> headers;
  std::vector<ImageShard> shards;
  Dataset dataset;
  for (const std::string& shard_path : paths) {
    headers.push_back(read_header(open_dataset_file(shard_path)));
    const FileHeader& header = headers.back();
    if (headers.size() == 1) {
      dataset = header.dataset;
    } else {
      check_agrees(headers.front(), header);
      dataset.size += header.dataset.size;
      append(dataset.labels, header.dataset.labels);
    }
    shards.push_back({shard_path, header.dataset.size});
  }
  dataset.source = path;
  const bool floats = headers.front().floats;
  const int64_t held_bytes = dataset.size * dataset.sample_numel() * (floats ? int64_t{sizeof(float)} : int64_t{1});
  if (cache_bytes > 0 && held_bytes > cache_bytes) {
    dataset.cache = cached_pixels(std::move(shards), dataset.sample_numel(), floats, dataset.pixel_scale.has_value(),
                                  cache_bytes);
    constexpr double kMiB = 1 << 20;
    chief_info(str_cat("'", path, "': ", fixed(static_cast<double>(held_bytes) / kMiB, 1),
                       " MiB of pixels, more than data.cache_mb: read in blocks through a ",
                       fixed(static_cast<double>(cache_bytes) / kMiB, 1), " MiB cache"));
    return dataset;
  }
  for (const std::string& shard_path : paths) {
    const io::H5File file = open_dataset_file(shard_path);
    if (floats) {
      append(dataset.float_images, float_pixels(file, dataset.sample_numel(), dataset.pixel_scale.has_value()));
    } else {
      append(dataset.images, integer_pixels(file, dataset.sample_numel()));
    }
  }
  return dataset;
}

void write_hdf5_dataset(const std::string& path, const Dataset& dataset, bool compress) {
  MIRRORED_CHECK(dataset.sample_shape.size() == 3, "sample shape ",
                 shape_str(dataset.sample_shape), " is not [C, H, W]");
  MIRRORED_CHECK(dataset.float_images.empty() && dataset.in_memory(),
                 "write_hdf5_dataset writes uint8 images held in memory only");
  MIRRORED_CHECK(static_cast<int64_t>(dataset.images.size()) == dataset.size * dataset.sample_numel(),
                 dataset.images.size(), " image bytes for ", dataset.size, " samples of ",
                 shape_str(dataset.sample_shape));
  MIRRORED_CHECK(static_cast<int64_t>(dataset.labels.size()) == dataset.size,
                 dataset.labels.size(), " labels for ", dataset.size, " samples");
  MIRRORED_CHECK(dataset.class_names.empty() || static_cast<int>(dataset.class_names.size()) == dataset.num_classes,
                 dataset.class_names.size(), " class names for ", dataset.num_classes, " classes");

  const Shape& sample = dataset.sample_shape;
  // Single-channel images are stored as [N, H, W], the layout MNIST tools expect.
  const Shape image_shape = sample[0] == 1 ? Shape{dataset.size, sample[1], sample[2]}
                                           : Shape{dataset.size, sample[0], sample[1], sample[2]};
  io::write_hdf5_file(path, [&](io::H5File& file) {
    file.write_u8(kImages, image_shape, dataset.images.data(), compress);
    file.write_u8(kLabels, {dataset.size}, dataset.labels.data());
    file.write_attribute("num_classes", int64_t{dataset.num_classes});
    if (dataset.pixel_scale) file.write_real_attribute("pixel_scale", *dataset.pixel_scale);
    if (!dataset.class_names.empty()) file.write_attribute("class_names", class_names_json(dataset.class_names));
  });
}

std::string shard_name(const std::string& path, int64_t index, int64_t count) {
  const std::filesystem::path whole(path);
  char number[64];
  std::snprintf(number, sizeof number, "-%05lld-of-%05lld", static_cast<long long>(index),
                static_cast<long long>(count));
  return (whole.parent_path() / str_cat(whole.stem().string(), number, whole.extension().string())).string();
}

std::vector<std::string> write_hdf5_shards(const std::string& path, const Dataset& dataset, int64_t shard_bytes) {
  MIRRORED_CHECK(shard_bytes >= 0, "shard_bytes ", shard_bytes);
  const int64_t sample_bytes = dataset.sample_numel() + 1;
  const int64_t per_shard =
      shard_bytes == 0 ? dataset.size : std::clamp<int64_t>(shard_bytes / sample_bytes, 1, dataset.size);
  const int64_t count = (dataset.size + per_shard - 1) / per_shard;
  if (count == 1) {
    write_hdf5_dataset(path, dataset);
    return {path};
  }
  std::vector<std::string> paths;
  for (int64_t index = 0; index < count; ++index) {
    const int64_t first = index * per_shard;
    const int64_t samples = std::min(per_shard, dataset.size - first);
    Dataset shard;
    shard.source = shard_name(path, index, count);
    shard.size = samples;
    shard.sample_shape = dataset.sample_shape;
    shard.num_classes = dataset.num_classes;
    shard.pixel_scale = dataset.pixel_scale;
    shard.class_names = dataset.class_names;
    const auto numel = static_cast<size_t>(dataset.sample_numel());
    shard.images.assign(dataset.images.begin() + static_cast<std::ptrdiff_t>(first * numel),
                        dataset.images.begin() + static_cast<std::ptrdiff_t>((first + samples) * numel));
    shard.labels.assign(dataset.labels.begin() + first, dataset.labels.begin() + first + samples);
    write_hdf5_dataset(shard.source, shard);
    paths.push_back(shard.source);
  }
  return paths;
}

}  // namespace mirrored::data
