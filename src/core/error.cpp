#include "mirrored/core/error.h"

namespace mirrored {

std::string where(const char* file, int line, const std::string& what) {
  return str_cat(file, ":", line, ": ", what);
}

}  // namespace mirrored
