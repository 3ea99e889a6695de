#include "mirrored/core/error.h"

#include "mirrored/core/process.h"

namespace mirrored {

std::string where(const char* file, int line, const std::string& what) {
  return str_cat(file, ":", line, ": ", what, " [", describe_process(), "]");
}

}  // namespace mirrored
