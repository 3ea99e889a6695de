// Writes synthetic photograph-like JPEG files (smooth gradients, a few soft discs and sensor
// noise) with TurboJPEG, for the image importer's tests and benchmark:
//   make_jpeg DIR PREFIX COUNT WIDTH HEIGHT CHANNELS QUALITY SEED
// writes DIR/PREFIX-00000.jpg and on; CHANNELS 1 writes grayscale JPEGs, 3 colour (4:2:0).
#include <turbojpeg.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<unsigned char> synthetic_image(int width, int height, int channels, std::mt19937& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, 6.0);
  double base[3], slope_x[3], slope_y[3];
  for (int c = 0; c < 3; ++c) {
    base[c] = 40 + 150 * unit(rng);
    slope_x[c] = 80 * (unit(rng) - 0.5);
    slope_y[c] = 80 * (unit(rng) - 0.5);
  }
  struct Disc {
    double x, y, r, value[3];
  };
  std::vector<Disc> discs(4);
  for (Disc& d : discs) {
    d.x = unit(rng) * width, d.y = unit(rng) * height, d.r = (0.1 + 0.3 * unit(rng)) * std::min(width, height);
    for (double& v : d.value) v = 255 * unit(rng);
  }
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        double v = base[c] + slope_x[c] * x / width + slope_y[c] * y / height;
        for (const Disc& d : discs) {
          const double dist = std::hypot(x - d.x, y - d.y) / d.r;
          if (dist < 1.0) v += (d.value[c] - v) * (1.0 - dist * dist);
        }
        v += noise(rng);
        pixels[(static_cast<size_t>(y) * width + x) * channels + c] =
            static_cast<unsigned char>(std::lround(std::fmin(255.0, std::fmax(0.0, v))));
      }
    }
  }
  return pixels;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: make_jpeg DIR PREFIX COUNT WIDTH HEIGHT CHANNELS QUALITY SEED\n");
    return 2;
  }
  const std::string dir = argv[1], prefix = argv[2];
  const int count = std::atoi(argv[3]), width = std::atoi(argv[4]), height = std::atoi(argv[5]);
  const int channels = std::atoi(argv[6]), quality = std::atoi(argv[7]);
  std::mt19937 rng(static_cast<unsigned>(std::atoi(argv[8])));
  if (count < 0 || width < 1 || height < 1 || (channels != 1 && channels != 3) || quality < 1 || quality > 100) {
    std::fprintf(stderr, "make_jpeg: bad arguments\n");
    return 2;
  }
  tjhandle tj = tjInitCompress();
  for (int i = 0; i < count; ++i) {
    const std::vector<unsigned char> pixels = synthetic_image(width, height, channels, rng);
    unsigned char* jpeg = nullptr;
    unsigned long size = 0;
    if (tjCompress2(tj, pixels.data(), width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &jpeg, &size,
                    channels == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0) != 0) {
      std::fprintf(stderr, "make_jpeg: %s\n", tjGetErrorStr2(tj));
      return 1;
    }
    char name[64];
    std::snprintf(name, sizeof name, "-%05d.jpg", i);
    const std::string path = dir + "/" + prefix + name;
    std::FILE* out = std::fopen(path.c_str(), "wb");
    if (!out || std::fwrite(jpeg, 1, size, out) != size || std::fclose(out) != 0) {
      std::perror(path.c_str());
      return 1;
    }
    tjFree(jpeg);
  }
  tjDestroy(tj);
  return 0;
}
