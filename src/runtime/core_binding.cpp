#include "mirrored/runtime/core_binding.h"

#include <algorithm>

#include "mirrored/core/cpu_affinity.h"
#include "mirrored/core/log.h"

namespace mirrored::runtime {
namespace {
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    const size_t dash = item.find('-');
    const int first = std::stoi(item.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    at = end + 1;
  }
  return cpus;
}
}  // namespace

CoreBinding plan_core_binding(BindCores mode, const std::vector<int>& found,
                              const std::vector<std::vector<int>>& host_masks, int local_rank,
                              const std::vector<std::vector<int>>& cores) {
  CoreBinding plan{found, {}, "", ""};
  if (mode == BindCores::kOff) {
    plan.note = str_cat("off (cpus ", cpu_list_str(found), ")");
    return plan;
  }
  const bool same_masks =
      std::all_of(host_masks.begin(), host_masks.end(), [&](const std::vector<int>& mask) { return mask == found; });
  if (!same_masks) {
    plan.note = str_cat("as the launcher bound it (cpus ", cpu_list_str(found), ")");
    return plan;
  }
  const auto local_size = static_cast<int>(host_masks.size());
  plan.cpus = cores_for_local_rank(cores, local_rank, local_size);
  if (plan.cpus.empty()) {
    plan.note = str_cat("unbound: ", local_size, " ranks share ", cores.size(), " core(s) (cpus ",
                        cpu_list_str(found), ")");
    return plan;
  }
  plan.note = str_cat("cpus ", cpu_list_str(plan.cpus));
  if (plan.cpus == found) plan.cpus.clear();  // already there: nothing to change
  return plan;
}

CoreBinding bind_cores(BindCores mode, comm::Communicator& world, const Cluster& cluster) {
  const std::vector<int> found = allowed_cpus();
  if (mode == BindCores::kOff) return plan_core_binding(mode, found, {found}, 0, {});
  const auto masks = world.allgather_strings(cpu_list_str(found));
  std::vector<std::vector<int>> host_masks;
  int my_index = 0;
  for (const auto& placement : cluster.placements()) {
    if (placement.host != cluster.host()) continue;
    if (placement.rank == cluster.rank()) my_index = static_cast<int>(host_masks.size());
    host_masks.push_back(parse_cpu_list(masks[static_cast<size_t>(placement.rank)]));
  }
  CoreBinding binding = plan_core_binding(mode, found, host_masks, my_index, group_into_cores(found));
  if (!binding.cpus.empty()) bind_process_to_cpus(binding.cpus);
  const auto notes = world.allgather_strings(binding.note);
  const bool all_same = std::all_of(notes.begin(), notes.end(), [&](const std::string& n) { return n == notes[0]; });
  std::string line = "core binding:";
  if (all_same && notes.size() > 1) line += str_cat(" every rank ", notes[0]);
  else
    for (size_t r = 0; r < notes.size(); ++r) line += str_cat(r ? "; " : " ", "rank ", r, " ", notes[r]);
  binding.summary = std::move(line);
  return binding;
}

}  // namespace mirrored::runtime
