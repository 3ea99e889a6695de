// The architecture list's reading (kernel_image_for is in cuda/kernel_image.cu).
#include "mirrored/kernels/cuda_arch.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace mirrored::kernels {

ArchCoverage arch_coverage(const std::string& built, int cc) {
  std::string list = built;
  if (list.rfind("native", 0) == 0) list = list.substr(list.find(':') == std::string::npos ? list.size()
                                                                                             : list.find(':') + 1);
  bool any = false, machine_code = false, ptx = false;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find_first_of(",;", start), list.size());
    std::string entry = list.substr(start, end - start);
    start = end + 1;
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.front()))) entry.erase(0, 1);
    if (entry.empty() || !std::isdigit(static_cast<unsigned char>(entry.front()))) continue;
    any = true;
    const int arch = std::atoi(entry.c_str());
    const bool real = entry.find("-virtual") == std::string::npos;
    const bool virt = entry.find("-real") == std::string::npos;
    // Architecture-specific (90a) and family-specific (100f) targets: a letter after the
    // digits. "a" runs on exactly that architecture; "f" on its family at an equal or
    // higher minor version; neither carries PTX that other architectures can use.
    const size_t digits = entry.find_first_not_of("0123456789");
    const char suffix = digits < entry.size() ? entry[digits] : '\0';
    const bool specific = suffix == 'a', family = suffix == 'f';
    if (real && (specific ? arch == cc : arch / 10 == cc / 10 && arch <= cc)) machine_code = true;
    if (virt && !specific && !family && arch <= cc) ptx = true;
  }
  if (!any) return ArchCoverage::kUnknown;
  if (machine_code) return ArchCoverage::kMachineCode;
  return ptx ? ArchCoverage::kPtx : ArchCoverage::kNone;
}

}  // namespace mirrored::kernels
