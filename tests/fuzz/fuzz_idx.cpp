// libFuzzer target: the IDX reader (plain and gzip'd). Bad files must end in
// mirrored::Error with a message; anything else (a crash, a sanitizer report, another
// exception type, a huge allocation from a corrupt header) is a finding.
#include "fuzz_input_file.h"
#include "mirrored/core/error.h"
#include "mirrored/core/tensor.h"
#include "mirrored/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mirrored::fuzz::write_input(".idx", data, size);
  try {
    const mirrored::data::IdxArray array = mirrored::data::read_idx(path);
    if (static_cast<int64_t>(array.values.size()) != mirrored::shape_numel(array.dims)) __builtin_trap();
  } catch (const mirrored::Error&) {
  }
  return 0;
}
