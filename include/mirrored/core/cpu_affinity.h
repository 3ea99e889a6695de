#pragma once
// Which logical CPUs this process may run on, grouped into physical cores, and how to
// move every thread of the process onto a subset of them. Linux only (sched_setaffinity);
// elsewhere the process mask reads as every CPU and binding does nothing.
#include <string>
#include <vector>

namespace mirrored {

// The logical CPUs in this thread's affinity mask (which the process's threads share
// unless someone bound them one by one), ascending.
std::vector<int> allowed_cpus();

// `cpus` grouped by physical core (SMT siblings together, from sysfs), cores in order of
// their lowest CPU; each CPU its own core where the topology cannot be read.
std::vector<std::vector<int>> group_into_cores(const std::vector<int>& cpus);

// The cores rank `local_rank` of `local_size` ranks on a host takes: `cores` split into
// local_size contiguous runs, sizes differing by at most one (the first runs take the
// remainder). Empty when there are fewer cores than ranks: no disjoint split exists.
std::vector<int> cores_for_local_rank(const std::vector<std::vector<int>>& cores, int local_rank, int local_size);

// Sets the affinity of every thread the process has now (/proc/self/task: the BLAS pool,
// MPI's and the runtime's threads), so all of them follow; threads started later inherit
// the mask of the thread that starts them. Throws Error naming the CPU set on failure.
void bind_process_to_cpus(const std::vector<int>& cpus);

// "0-3,8" for {0,1,2,3,8}.
std::string cpu_list_str(const std::vector<int>& cpus);

}  // namespace mirrored
