#include "mirrored/core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "mirrored/core/process.h"

namespace mirrored {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};

std::atomic<int> g_copy_fd{-1};

void emit(FILE* stream, const std::string& line) {
  std::string text = line;
  text.push_back('\n');
  write_output(stream, text);
}
bool is_chief() { return process_identity().rank == 0; }
}  // namespace

void write_output(std::FILE* stream, const std::string& text) {
  // One write per line so lines from several threads or ranks do not interleave mid-line.
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
  const int copy = g_copy_fd.load();
  if (copy >= 0 && ::write(copy, text.data(), text.size()) < 0) {
    // Nowhere left to say it: the copy is best effort.
  }
}

void copy_output_to(int fd) { g_copy_fd = fd; }

void set_log_level(LogLevel level) { g_level = level; }
LogLevel log_level() { return g_level; }

void chief_print(const std::string& line) {
  if (is_chief()) emit(stdout, line);
}
void chief_info(const std::string& line) {
  if (is_chief() && g_level.load() >= LogLevel::kInfo) emit(stdout, line);
}
void chief_verbose(const std::string& line) {
  if (is_chief() && g_level.load() >= LogLevel::kVerbose) emit(stdout, line);
}
void rank_warning(const std::string& line) {
  emit(stderr, str_cat("mirrored: warning [", describe_process(), "]: ", line));
}
void rank_error(const std::string& line) {
  emit(stderr, str_cat("mirrored: error [", describe_process(), "]: ", line));
}

}  // namespace mirrored
