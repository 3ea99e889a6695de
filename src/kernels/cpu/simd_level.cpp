#include "simd_level.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::kernels::cpu {
namespace {
constexpr int kUnread = -1;
// Read on every dispatched kernel call, written once (or by a test): a relaxed atomic.
std::atomic<int> g_level{kUnread};
}  // namespace

SimdLevel widest_simd_level() {
  static const SimdLevel widest = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return SimdLevel::kAvx512;  // also checks the OS saves its state
    if (__builtin_cpu_supports("avx2")) return SimdLevel::kAvx2;
#endif
    return SimdLevel::kBaseline;
  }();
  return widest;
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kBaseline:
      break;
  }
  return "baseline";
}

SimdLevel simd_level_for(std::string_view setting) {
  const SimdLevel widest = widest_simd_level();
  if (setting.empty() || setting == "auto") return widest;
  SimdLevel asked = SimdLevel::kBaseline;
  if (setting == "avx512")
    asked = SimdLevel::kAvx512;
  else if (setting == "avx2")
    asked = SimdLevel::kAvx2;
  else if (setting != "baseline")
    throw InputError(str_cat("MIRRORED_CPU_SIMD=", setting, ": expected auto, avx512, avx2 or baseline"));
  if (asked > widest)
    throw InputError(str_cat("MIRRORED_CPU_SIMD=", setting, ": this CPU runs at most ", simd_level_name(widest)));
  return asked;
}

SimdLevel simd_level() {
  int level = g_level.load(std::memory_order_relaxed);
  if (level == kUnread) {
    const char* setting = std::getenv("MIRRORED_CPU_SIMD");
    int expected = kUnread;
    g_level.compare_exchange_strong(expected, static_cast<int>(simd_level_for(setting ? setting : "")));
    level = g_level.load(std::memory_order_relaxed);
  }
  return static_cast<SimdLevel>(level);
}

void set_simd_level(SimdLevel level) {
  MIRRORED_CHECK(level <= widest_simd_level(), "set_simd_level: ", simd_level_name(level), " is above this CPU's ",
                 simd_level_name(widest_simd_level()));
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

}  // namespace mirrored::kernels::cpu
