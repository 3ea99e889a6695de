#pragma once
// How much memory this host has, to refuse a model that cannot fit before allocating it
// (an allocation of petabytes otherwise ends in std::bad_alloc with no word of which buffer).
#include <cstdint>
#include <string>

namespace mirrored {

struct HostMemory {
  int64_t total_bytes = 0;      // physical memory
  int64_t available_bytes = 0;  // MemAvailable of /proc/meminfo (the total where unknown)
};

HostMemory host_memory();

// "1.5 GiB", "12.0 MiB", "512 B": binary units, one decimal.
std::string bytes_str(double bytes);

}  // namespace mirrored
