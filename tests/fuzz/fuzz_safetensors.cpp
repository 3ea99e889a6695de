// libFuzzer target: the safetensors reader (io::SafetensorsFile) on arbitrary file bytes.
// Every file must be refused with an InputError (never another exception, a crash or a
// huge allocation from a header's numbers), or be read whole: every tensor's values, as
// many as its shape says, through the descriptor that was checked.
#include "fuzz_input_file.h"
#include "mirrored/core/error.h"
#include "mirrored/core/tensor.h"
#include "mirrored/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mirrored::fuzz::write_input(".safetensors", data, size);
  try {
    const mirrored::io::SafetensorsFile file(path);
    for (const std::string& name : file.names()) {
      const std::vector<float> values = file.read(name);
      if (static_cast<int64_t>(values.size()) != mirrored::shape_numel(file.shape(name))) __builtin_trap();
    }
  } catch (const mirrored::InputError&) {
  }
  return 0;
}
