#pragma once
// Shared by the per-library check macros (CUDA, cuBLAS, cuDNN, NCCL): one message shape,
// "file:line: <call as text>: <library message>", thrown as
// mirrored::Error or, for destructors and other places that must not throw, logged.
#include <string>

namespace mirrored {

[[noreturn]] void throw_library_error(const char* file, int line, const char* call, const std::string& message);
void log_library_error(const char* file, int line, const char* call, const std::string& message) noexcept;

}  // namespace mirrored
