// libFuzzer target: a text corpus file as import-text reads it (data::append_documents over
// the streaming .gz/.zst reader and the .jsonl record reader). The first byte picks the
// file's form (.jsonl.gz, .jsonl.zst, .txt.gz, .txt.zst, .jsonl), the rest are its bytes.
// Every file must give text or an InputError, never another exception or a crash; what it
// gives is bounded by the expansion rule (1100 per byte read, plus 1 MiB), so memory follows
// the input's size, never what a stream claims (-rss_limit_mb in tests/fuzz/run.sh).
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/data/decompressing_reader.h"
#include "mirrored/data/document_reader.h"

namespace {

constexpr std::array<const char*, 5> kForms = {".jsonl.gz", ".jsonl.zst", ".txt.gz", ".txt.zst", ".jsonl"};

// One scratch file per form and process (in /dev/shm when it exists).
std::string write_form(size_t form, const uint8_t* data, size_t size) {
  static const std::string base = [] {
    const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    return (dir / ("mirrored-fuzz-" + std::to_string(::getpid()) + "-corpus")).string();
  }();
  const std::string path = base + kForms[form];
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) __builtin_trap();  // the harness itself is broken
  if (size > 0 && std::fwrite(data, 1, size, file) != size) __builtin_trap();
  std::fclose(file);
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t form = data[0] % kForms.size();
  const std::string path = write_form(form, data + 1, size - 1);
  const auto format = form == 2 || form == 3 ? mirrored::data::TextFormat::kText : mirrored::data::TextFormat::kJsonl;
  std::vector<uint8_t> corpus;
  try {
    const mirrored::data::DocumentReadStats stats =
        mirrored::data::append_documents({path, format, /*walked=*/true}, "text", corpus);
    if (stats.text_bytes != static_cast<int64_t>(corpus.size())) __builtin_trap();
    if (static_cast<uint64_t>(corpus.size()) > mirrored::data::kMaxExpansion * (size - 1) + (uint64_t{1} << 20) &&
        form != 4)
      __builtin_trap();
  } catch (const mirrored::InputError&) {
  }
  return 0;
}
