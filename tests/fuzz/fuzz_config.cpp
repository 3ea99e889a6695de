// libFuzzer target: the INI config parser. Any text must give a TrainConfig or an
// InputError(kUsage); an accepted config must print back (to_ini) to text that parses to
// the same resolved configuration.
#include "fuzz_input_file.h"
#include "mirrored/config/config.h"
#include "mirrored/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mirrored;
  const std::string path = fuzz::write_input(".ini", data, size);
  config::TrainConfig config;
  try {
    config = config::parse_train_config({"--config", path});
  } catch (const InputError& e) {
    if (e.code() != ExitCode::kUsage) __builtin_trap();
    return 0;
  }
  const std::string ini = config::to_ini(config);
  const std::string again = fuzz::write_input(".ini", reinterpret_cast<const uint8_t*>(ini.data()), ini.size());
  try {
    if (config::to_ini(config::parse_train_config({"--config", again})) != ini) __builtin_trap();
  } catch (const Error&) {
    __builtin_trap();  // the resolved config.ini of an accepted config must parse back
  }
  return 0;
}
