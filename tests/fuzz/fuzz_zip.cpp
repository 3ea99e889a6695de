// libFuzzer target: the zip reader (data::ZipArchive) on arbitrary file bytes. Every archive
// must be refused with an InputError, or give members whose bytes are exactly their
// declared size and CRC-32; memory must follow what a member really inflates to, never what
// its directory entry claims (-rss_limit_mb in tests/fuzz/run.sh catches that).
#include "fuzz_input_file.h"
#include "mirrored/core/error.h"
#include "mirrored/data/zip_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mirrored::fuzz::write_input(".zip", data, size);
  try {
    const mirrored::data::ZipArchive archive(path);
    for (const mirrored::data::ZipMember& member : archive.members()) {
      try {
        const std::vector<uint8_t> bytes = archive.read(member);
        if (bytes.size() != member.size) __builtin_trap();
      } catch (const mirrored::InputError&) {
      }
    }
  } catch (const mirrored::InputError&) {
  }
  return 0;
}
