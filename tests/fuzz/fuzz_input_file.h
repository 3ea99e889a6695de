#pragma once
// The readers under test take a path, so each fuzz input is written to one scratch file
// per process (in /dev/shm when it exists, to keep the disk out of the loop).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace mirrored::fuzz {

inline std::string write_input(const char* suffix, const uint8_t* data, size_t size) {
  static const std::string path = [&] {
    const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    return (dir / ("mirrored-fuzz-" + std::to_string(::getpid()) + suffix)).string();
  }();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) __builtin_trap();  // the harness itself is broken
  if (size > 0 && std::fwrite(data, 1, size, file) != size) __builtin_trap();
  std::fclose(file);
  return path;
}

}  // namespace mirrored::fuzz
