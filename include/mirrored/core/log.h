#pragma once
// Rank-aware logging. chief_* prints on rank 0 only (the one helper for rank-0 output);
// log_* prints on every rank with a "[rank r]" prefix; warnings and errors go to stderr.
#include <string>

#include "mirrored/core/strings.h"

namespace mirrored {

enum class LogLevel { kQuiet = 0, kInfo = 1, kVerbose = 2 };
void set_log_level(LogLevel level);
LogLevel log_level();

void chief_print(const std::string& line);          // stdout, rank 0, not filtered by level
void chief_info(const std::string& line);           // stdout, rank 0, level >= info
void chief_verbose(const std::string& line);        // stdout, rank 0, level >= verbose
void rank_warning(const std::string& line);         // stderr, any rank
void rank_error(const std::string& line);           // stderr, any rank

}  // namespace mirrored
