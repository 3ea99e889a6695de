#pragma once
// Rewriting or exporting a file whole or not at all: the one way mirrored replaces a file
// (metrics.jsonl cut back on resume, config.ini, final.h5, checkpoints, exports, imports,
// tokenizer models, flight recorder dumps).
//
// The new content goes to a temporary beside the target, "<target>.tmp.<6 random letters>"
// in the target's own folder (a rename cannot cross file systems), which:
//   - is created with O_CREAT | O_EXCL | O_NOFOLLOW: no existing file is opened, truncated
//     or written through it, a symlink planted under its name included, and no two writers
//     share one;
//   - is held under an exclusive flock for as long as this object lives, which tells an
//     abandoned temporary (its writer died) from one being written
//     (remove_abandoned_temporaries);
//   - on commit(): every byte written is checked against the file's size, the file is
//     fsynced, renamed over the target and the folder fsynced (the rename itself durable).
// Until commit() returns the target is untouched; an object destroyed without commit() (an
// error on the way) removes its temporary. Every failure throws
// Error(ExitCode::kWriteFailed) naming the target and the system's reason (a full disk
// says "No space left on device"), and saying that the target is unchanged.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mirrored {

class FileReplacement {
 public:
  // Creates the temporary for `target`. Its mode is the target's when the target exists
  // (a rewrite keeps its permissions), else `mode` less the umask.
  explicit FileReplacement(std::string target, mode_t mode = 0644);
  ~FileReplacement();
  FileReplacement(const FileReplacement&) = delete;
  FileReplacement& operator=(const FileReplacement&) = delete;

  // Appends to the new content (the whole of it, retrying short writes).
  void write(const void* data, size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }

  // For a library that opens files by name (HDF5): "/proc/self/fd/<n>", which reaches this
  // very temporary whatever becomes of its name in the folder. What the library writes
  // there is not counted by write(); commit() then checks only that the file is not empty.
  std::string descriptor_path() const;

  const std::string& target() const { return target_; }
  const std::string& temporary() const { return temporary_; }

  // Checks, fsyncs and renames the temporary over the target (see above). Once only.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what, int error) const;

  std::string target_;
  std::string temporary_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// `bytes` as the whole new content of `path`, through a FileReplacement.
void replace_file(const std::string& path, std::string_view bytes, mode_t mode = 0644);

// Whether `name` is a FileReplacement temporary of a target named `target_name`
// ("<target_name>.tmp.XXXXXX").
bool is_replacement_temporary(std::string_view name, std::string_view target_name);

// Whether `name` is a FileReplacement temporary of a target whose name `owned` accepts.
bool is_replacement_temporary_of(std::string_view name, const std::function<bool(std::string_view)>& owned);

// Removes, from `folder`, the files whose names `is_temporary` accepts (a writer's own
// temporaries: is_replacement_temporary_of) and that no writer holds locked (their writer
// died mid-write), and only plain files of this user: never a write in progress, never a
// symlink, never a name the caller does not claim. Returns how many it removed; a missing
// folder has none.
size_t remove_abandoned_temporaries(const std::string& folder,
                                    const std::function<bool(std::string_view)>& is_temporary);

}  // namespace mirrored
