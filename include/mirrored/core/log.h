#pragma once
// Rank-aware logging. chief_* prints to stdout on rank 0 only (the one helper for rank-0
// output); rank_warning and rank_error print to stderr on any rank, each line prefixed
// once with "mirrored: warning|error [rank r/n on host]: ". Messages passed to them (for
// example an Error's what(), built by where()) carry no rank or host of their own.
#include <cstdio>
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

// Every piece of output above, and the progress display's, goes out through this: one write
// of `text` to `stream` (flushed), and to the copy below when there is one.
void write_output(std::FILE* stream, const std::string& text);
// From now on every output is also appended to file descriptor `fd` (-1: no more), which the
// caller keeps open: the output of a rank that may soon outlive its launcher, whose
// stdout and stderr end at the launcher (comm/failure/runtime_loss.h).
void copy_output_to(int fd);

}  // namespace mirrored
