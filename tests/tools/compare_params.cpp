// compare_params A.h5 B.h5 [--exact | --rtol X]
// Compares every /params/* dataset of two final.h5 files. --exact: bitwise equality.
// --rtol: per parameter, max|a-b| / max(max|a|, 1e-3) must not exceed X.
// Prints the worst parameter and exits 1 when the files differ beyond the tolerance.
#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/io/hdf5.h"

namespace {
std::vector<std::string> param_names(const mirrored::io::H5File& file) {
  std::vector<std::string> names;
  hid_t group = H5Gopen2(file.id(), "/params", H5P_DEFAULT);
  if (group < 0) return names;
  H5G_info_t info;
  H5Gget_info(group, &info);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[512] = {};
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name), H5P_DEFAULT);
    names.emplace_back(name);
  }
  H5Gclose(group);
  return names;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: compare_params A.h5 B.h5 --exact | --rtol X\n");
    return 2;
  }
  const bool exact = std::strcmp(argv[3], "--exact") == 0;
  const double rtol = exact ? 0.0 : std::stod(argv[4]);
  try {
    mirrored::io::H5File a(argv[1], mirrored::io::H5File::Access::kRead);
    mirrored::io::H5File b(argv[2], mirrored::io::H5File::Access::kRead);
    const auto names = param_names(a);
    if (names.empty() || names != param_names(b)) {
      std::fprintf(stderr, "parameter sets differ (or are empty)\n");
      return 1;
    }
    double worst = 0.0;
    std::string worst_name;
    for (const auto& name : names) {
      const auto x = a.read_f32("/params/" + name), y = b.read_f32("/params/" + name);
      if (x.size() != y.size()) {
        std::fprintf(stderr, "%s: sizes %zu vs %zu\n", name.c_str(), x.size(), y.size());
        return 1;
      }
      if (exact) {
        if (std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) {
          std::fprintf(stderr, "%s: not bit-identical\n", name.c_str());
          return 1;
        }
        continue;
      }
      double diff = 0.0, scale = 1e-3;
      for (size_t i = 0; i < x.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(x[i] - y[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(x[i])));
      }
      if (diff / scale > worst) {
        worst = diff / scale;
        worst_name = name;
      }
    }
    if (exact) {
      std::printf("bit-identical: %zu parameters\n", names.size());
      return 0;
    }
    std::printf("max relative difference %.3g (%s), tolerance %.3g\n", worst, worst_name.c_str(), rtol);
    return worst <= rtol ? 0 : 1;
  } catch (const mirrored::Error& e) {
    std::fprintf(stderr, "compare_params: %s\n", e.what());
    return 2;
  }
}
