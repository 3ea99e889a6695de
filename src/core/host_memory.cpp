#include "mirrored/core/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "mirrored/core/strings.h"

namespace mirrored {

HostMemory host_memory() {
  HostMemory memory;
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) memory.total_bytes = static_cast<int64_t>(pages) * page_size;
  memory.available_bytes = memory.total_bytes;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") {
      memory.available_bytes = kib * 1024;
      break;
    }
  }
  return memory;
}

std::string bytes_str(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (bytes >= 1024.0 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? str_cat(static_cast<int64_t>(bytes), " B") : str_cat(fixed(bytes, 1), " ", kUnits[unit]);
}

}  // namespace mirrored
