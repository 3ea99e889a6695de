#include "mirrored/core/cpu_affinity.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "mirrored/core/error.h"

namespace mirrored {
namespace {
// The physical core a logical CPU belongs to: its package and core id from sysfs, or -1s
// where the topology is not exposed (containers without /sys, other systems).
std::pair<long, long> core_of(int cpu) {
  auto read = [cpu](const char* field) {
    std::ifstream in(str_cat("/sys/devices/system/cpu/cpu", cpu, "/topology/", field));
    long value = -1;
    if (!(in >> value)) return -1L;
    return value;
  };
  return {read("physical_package_id"), read("core_id")};
}
}  // namespace

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    return cpus;
  }
#endif
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (int cpu = 0; cpu < std::max(1L, online); ++cpu) cpus.push_back(cpu);
  return cpus;
}

std::vector<std::vector<int>> group_into_cores(const std::vector<int>& cpus) {
  std::vector<std::vector<int>> cores;
  std::map<std::pair<long, long>, size_t> index_of_core;
  for (int cpu : cpus) {
    const auto core = core_of(cpu);
    if (core.second < 0) {
      cores.push_back({cpu});
      continue;
    }
    auto [it, inserted] = index_of_core.try_emplace(core, cores.size());
    if (inserted) cores.emplace_back();
    cores[it->second].push_back(cpu);
  }
  return cores;
}

std::vector<int> cores_for_local_rank(const std::vector<std::vector<int>>& cores, int local_rank, int local_size) {
  MIRRORED_CHECK(local_size >= 1 && local_rank >= 0 && local_rank < local_size, "local rank ", local_rank, " of ",
                 local_size);
  const auto n = static_cast<int>(cores.size());
  if (n < local_size) return {};
  const int base = n / local_size, extra = n % local_size;
  const int first = local_rank * base + std::min(local_rank, extra);
  const int count = base + (local_rank < extra ? 1 : 0);
  std::vector<int> cpus;
  for (int c = first; c < first + count; ++c)
    cpus.insert(cpus.end(), cores[static_cast<size_t>(c)].begin(), cores[static_cast<size_t>(c)].end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

void bind_process_to_cpus(const std::vector<int>& cpus) {
#ifdef __linux__
  MIRRORED_CHECK(!cpus.empty(), "binding to an empty CPU set");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  // The calling thread first: threads it starts from now on inherit its mask.
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    throw Error(ExitCode::kFailure, str_cat("sched_setaffinity(CPUs ", cpu_list_str(cpus), "): ", std::strerror(errno)));
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return;  // no /proc: threads started before now keep their mask
  while (const dirent* entry = readdir(tasks)) {
    const long tid = std::strtol(entry->d_name, nullptr, 10);
    if (tid <= 0) continue;
    // A thread may have exited since the listing (ESRCH): nothing left to bind.
    if (sched_setaffinity(static_cast<pid_t>(tid), sizeof(set), &set) != 0 && errno != ESRCH) {
      const int error = errno;
      closedir(tasks);
      throw Error(ExitCode::kFailure,
                  str_cat("sched_setaffinity(thread ", tid, ", CPUs ", cpu_list_str(cpus), "): ", std::strerror(error)));
    }
  }
  closedir(tasks);
#else
  (void)cpus;
#endif
}

std::string cpu_list_str(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += j == i ? str_cat(cpus[i]) : str_cat(cpus[i], "-", cpus[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace mirrored
