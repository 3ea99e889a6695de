#include "image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

#include "mirrored/core/strings.h"

namespace mirrored::data::detail {
namespace {

enum class Format { kJpeg, kPng, kUnknown };

Format sniff(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kJpeg[] = {0xFF, 0xD8, 0xFF};
  static constexpr uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= sizeof kJpeg && std::memcmp(bytes.data(), kJpeg, sizeof kJpeg) == 0) return Format::kJpeg;
  if (bytes.size() >= sizeof kPng && std::memcmp(bytes.data(), kPng, sizeof kPng) == 0) return Format::kPng;
  return Format::kUnknown;
}

std::string not_an_image(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return "empty file";
  return "not a JPEG or PNG file (no JPEG or PNG signature in its first bytes)";
}

bool check_size(int64_t height, int64_t width, std::string& why) {
  if (height <= 0 || width <= 0 || height > kMaxImageSide || width > kMaxImageSide ||
      height * width > kMaxImagePixels) {
    why = str_cat("declares a ", width, "x", height, " image; accepted: sides up to ", kMaxImageSide, " and up to ",
                  kMaxImagePixels, " pixels");
    return false;
  }
  return true;
}

using TurboHandle = std::unique_ptr<void, decltype(&tjDestroy)>;

// One decompressor per thread, kept: creating one costs more than decoding a small image.
// After a failure it is replaced: a handle that has failed on a file may report a 0x0 size
// for the next (TurboJPEG 2.1 keeps part of the failed state).
TurboHandle& thread_handle() {
  thread_local TurboHandle handle(tjInitDecompress(), &tjDestroy);
  return handle;
}
tjhandle thread_decompressor() { return thread_handle().get(); }
void replace_decompressor() { thread_handle().reset(tjInitDecompress()); }

struct JpegHeader {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
};

bool jpeg_header(tjhandle tj, std::span<const uint8_t> bytes, JpegHeader& header, std::string& why) {
  if (tjDecompressHeader3(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), &header.width, &header.height,
                          &header.subsampling, &header.colorspace) != 0) {
    why = str_cat("corrupt JPEG header: ", tjGetErrorStr2(tj));
    replace_decompressor();
    return false;
  }
  return check_size(header.height, header.width, why);
}

// The smallest TurboJPEG scale (at most 1) whose output covers `at_least` on both sides.
tjscalingfactor jpeg_scale(const JpegHeader& header, ImageSize at_least) {
  tjscalingfactor best{1, 1};
  if (at_least.height <= 0 || at_least.width <= 0) return best;
  const ScaledSize needed = scaled_size(header.height, header.width, at_least.height, at_least.width);
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; factors && i < count; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num > f.denom) continue;
    if (TJSCALED(header.width, f) < needed.width || TJSCALED(header.height, f) < needed.height) continue;
    if (f.num * best.denom < best.num * f.denom) best = f;
  }
  return best;
}

bool decode_jpeg(std::span<const uint8_t> bytes, int64_t channels, ImageSize at_least, Image& image,
                 std::string& why) {
  tjhandle tj = thread_decompressor();
  if (!tj) {
    why = "cannot create a TurboJPEG decompressor";
    return false;
  }
  JpegHeader header;
  if (!jpeg_header(tj, bytes, header, why)) return false;
  const tjscalingfactor scale = jpeg_scale(header, at_least);
  image.width = TJSCALED(header.width, scale);
  image.height = TJSCALED(header.height, scale);
  image.channels = channels;
  image.pixels.resize(static_cast<size_t>(image.width * image.height * channels));  // every byte is written
  // Gray output from a colour file is its luma (Y) plane; RGB from a gray file repeats it.
  const int format = channels == 1 ? TJPF_GRAY : TJPF_RGB;
  if (tjDecompress2(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), image.pixels.data(),
                    static_cast<int>(image.width), 0, static_cast<int>(image.height), format,
                    TJFLAG_STOPONWARNING) != 0) {
    why = str_cat("corrupt JPEG data: ", tjGetErrorStr2(tj));
    replace_decompressor();
    return false;
  }
  return true;
}

struct PngImage {
  png_image image{};
  PngImage() { image.version = PNG_IMAGE_VERSION; }
  ~PngImage() { png_image_free(&image); }
  PngImage(const PngImage&) = delete;
  PngImage& operator=(const PngImage&) = delete;
};

bool png_header(PngImage& png, std::span<const uint8_t> bytes, std::string& why) {
  if (!png_image_begin_read_from_memory(&png.image, bytes.data(), bytes.size())) {
    why = str_cat("corrupt PNG header: ", png.image.message);
    return false;
  }
  return check_size(png.image.height, png.image.width, why);
}

bool decode_png(std::span<const uint8_t> bytes, int64_t channels, Image& image, std::string& why) {
  PngImage png;
  if (!png_header(png, bytes, why)) return false;
  // Read as the file's own kind (gray or colour, alpha composited onto black), then
  // converted like a JPEG (convert_channels), so both formats give the same pixels.
  const bool colour = (png.image.format & PNG_FORMAT_FLAG_COLOR) != 0;
  png.image.format = colour ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  image.height = png.image.height;
  image.width = png.image.width;
  image.channels = colour ? 3 : 1;
  image.pixels.assign(PNG_IMAGE_SIZE(png.image), 0);
  if (!png_image_finish_read(&png.image, nullptr, image.pixels.data(), 0, nullptr)) {
    why = str_cat("corrupt PNG data: ", png.image.message);
    return false;
  }
  image = convert_channels(std::move(image), channels);
  return true;
}

}  // namespace

bool read_image_size(std::span<const uint8_t> bytes, ImageSize& size, std::string& why) {
  switch (sniff(bytes)) {
    case Format::kJpeg: {
      JpegHeader header;
      if (!jpeg_header(thread_decompressor(), bytes, header, why)) return false;
      size = {header.height, header.width};
      return true;
    }
    case Format::kPng: {
      PngImage png;
      if (!png_header(png, bytes, why)) return false;
      size = {png.image.height, png.image.width};
      return true;
    }
    case Format::kUnknown:
      break;
  }
  why = not_an_image(bytes);
  return false;
}

bool decode_image(std::span<const uint8_t> bytes, int64_t channels, ImageSize at_least, Image& image,
                  std::string& why) {
  switch (sniff(bytes)) {
    case Format::kJpeg:
      return decode_jpeg(bytes, channels, at_least, image, why);
    case Format::kPng:
      return decode_png(bytes, channels, image, why);
    case Format::kUnknown:
      break;
  }
  why = not_an_image(bytes);
  return false;
}

}  // namespace mirrored::data::detail
