#include "mirrored/runtime/device_choice.h"

#include <cstdlib>

#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::runtime {
namespace {
// "2 GPU(s) are visible (CUDA_VISIBLE_DEVICES=3,4)": the narrowing is usually the answer
// to "why not the GPU I expected".
std::string visible_text(const DeviceQuery& query) {
  std::string text = str_cat(query.visible, " GPU(s) ", query.visible == 1 ? "is" : "are", " visible");
  if (query.visible_list_set) text += str_cat(" (CUDA_VISIBLE_DEVICES='", query.visible_list, "')");
  return text;
}
}  // namespace

DeviceQuery DeviceQuery::from(int local_rank, int local_size, int visible,
                              const std::function<const char*(const char*)>& getenv) {
  DeviceQuery query;
  query.local_rank = local_rank;
  query.local_size = local_size;
  query.visible = visible;
  if (const char* value = getenv("MIRRORED_CUDA_DEVICE")) query.override_index = value;
  if (const char* value = getenv("CUDA_VISIBLE_DEVICES")) {
    query.visible_list = value;
    query.visible_list_set = true;
  }
  return query;
}

DevicePick pick_cuda_device(const DeviceQuery& query) {
  if (!query.override_index.empty()) {
    const std::string& text = query.override_index;
    char* end = nullptr;
    const long parsed = std::strtol(text.c_str(), &end, 10);
    if (*end != '\0' || parsed < 0 || parsed > 1 << 20 || text.find_first_not_of("0123456789") != std::string::npos)
      throw InputError(str_cat("MIRRORED_CUDA_DEVICE='", text, "': expected a non-negative device index"),
                       ExitCode::kUsage);
    const int index = static_cast<int>(parsed);
    if (index >= query.visible)
      return {-1, str_cat("MIRRORED_CUDA_DEVICE=", index, " but ", visible_text(query),
                          query.visible > 0 ? str_cat("; valid indices are 0..", query.visible - 1) : std::string())};
    return {index, {}};
  }
  if (query.visible == 0) return {-1, str_cat("no GPU is visible", query.visible_list_set
                                                                       ? str_cat(" (CUDA_VISIBLE_DEVICES='",
                                                                                 query.visible_list, "')")
                                                                       : std::string())};
  if (query.visible == 1) return {0, {}};
  if (query.local_rank < query.visible) return {query.local_rank, {}};
  return {-1, str_cat("local rank ", query.local_rank, " of ", query.local_size, " on this host, but only ",
                      visible_text(query),
                      ": run at most one rank per GPU, give each rank its own GPU (srun --gpus-per-task=1, "
                      "CUDA_VISIBLE_DEVICES) or name one with MIRRORED_CUDA_DEVICE")};
}

Device choose_device(DeviceChoice choice, const Cluster& cluster) {
  if (choice == DeviceChoice::kCpu) return Device::cpu();
  std::string cuda_reason;
  const int visible = cuda_device_count(&cuda_reason);
  const DeviceQuery query = DeviceQuery::from(cluster.local_rank(), cluster.local_size(), visible,
                                              [](const char* name) { return std::getenv(name); });
  // The override is checked even when no GPU is visible: a typo should not pass silently.
  const DevicePick pick = pick_cuda_device(query);
  if (pick.ok()) return Device::cuda(pick.index);
  if (choice == DeviceChoice::kAuto) return Device::cpu();
  // Not uniform: other ranks may see other GPUs, so each rank reports for itself (the
  // error line names the rank and host).
  const std::string why = visible == 0 && query.override_index.empty()
                              ? str_cat(pick.reason, ": ", cuda_reason)
                              : pick.reason;
  throw Error(ExitCode::kUsage, str_cat("device = cuda, but this rank has no usable GPU: ", why));
}

}  // namespace mirrored::runtime
