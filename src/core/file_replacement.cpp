#include "mirrored/core/file_replacement.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored {
namespace {

constexpr std::string_view kTemporaryMark = ".tmp.";
constexpr size_t kRandomLetters = 6;
constexpr char kLetters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

std::string random_letters() {
  unsigned char bytes[kRandomLetters];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    // No entropy source (very old kernels): the clock and the pid still make a name that
    // O_EXCL then proves unique.
    const auto seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                      (static_cast<uint64_t>(getpid()) << 32);
    for (size_t i = 0; i < kRandomLetters; ++i) bytes[i] = static_cast<unsigned char>(seed >> (8 * i));
  }
  std::string letters(kRandomLetters, 'x');
  for (size_t i = 0; i < kRandomLetters; ++i) letters[i] = kLetters[bytes[i] % (sizeof kLetters - 1)];
  return letters;
}

std::string folder_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Full writes: retries short writes and EINTR. 0, or the errno of the failure.
int write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t done = ::write(fd, data, size);
    if (done < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += done;
    size -= static_cast<size_t>(done);
  }
  return 0;
}

}  // namespace

FileReplacement::FileReplacement(std::string target, mode_t mode) : target_(std::move(target)) {
  struct stat existing {};
  const bool rewrite = lstat(target_.c_str(), &existing) == 0 && S_ISREG(existing.st_mode);
  // A few tries: a clash of six random letters with a live temporary is already unlikely.
  for (int attempt = 0; attempt < 64 && fd_ < 0; ++attempt) {
    temporary_ = str_cat(target_, kTemporaryMark, random_letters());
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd_ < 0 && errno != EEXIST) fail("cannot create a temporary file beside it", errno);
  }
  if (fd_ < 0) fail("cannot create a temporary file beside it", EEXIST);
  // Held until the object goes: an abandoned temporary is one whose lock nobody holds.
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0 && errno != ENOLCK && errno != EOPNOTSUPP && errno != ENOSYS) {
    const int error = errno;
    ::close(fd_);
    ::unlink(temporary_.c_str());
    fd_ = -1;
    fail("cannot lock its temporary file", error);
  }
  // A rewrite keeps the target's permissions; a new file has `mode` less the umask (open).
  if (rewrite && fchmod(fd_, existing.st_mode & 07777) != 0) {
    // Best effort: the file is still written, with the umask's mode.
  }
}

FileReplacement::~FileReplacement() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temporary_.empty()) ::unlink(temporary_.c_str());
}

void FileReplacement::fail(const std::string& what, int error) const {
  throw Error(ExitCode::kWriteFailed, str_cat("cannot write '", target_, "': ", what, ": ", std::strerror(error),
                                              " ('", target_, "' is unchanged)"));
}

void FileReplacement::write(const void* data, size_t size) {
  MIRRORED_CHECK(fd_ >= 0 && !committed_, "write to '", target_, "' after commit");
  if (const int error = write_all(fd_, static_cast<const char*>(data), size); error != 0)
    fail(str_cat("writing ", size, " bytes to its temporary '", temporary_, "' (", written_, " written before) failed"),
         error);
  written_ += size;
}

std::string FileReplacement::descriptor_path() const { return str_cat("/proc/self/fd/", fd_); }

void FileReplacement::commit() {
  MIRRORED_CHECK(fd_ >= 0 && !committed_, "'", target_, "' committed twice");
  struct stat info {};
  if (fstat(fd_, &info) != 0) fail(str_cat("cannot check its temporary '", temporary_, "'"), errno);
  // Bytes through write() must all be there; a library's file (descriptor_path) must exist
  // at all (an HDF5 file is never empty).
  const bool whole = written_ > 0 ? static_cast<uint64_t>(info.st_size) == written_ : true;
  if (!whole)
    fail(str_cat("its temporary '", temporary_, "' holds ", info.st_size, " of the ", written_, " bytes written"), EIO);
  if (fsync(fd_) != 0) fail(str_cat("cannot flush its temporary '", temporary_, "' to disk"), errno);
  if (std::rename(temporary_.c_str(), target_.c_str()) != 0)
    fail(str_cat("cannot rename its temporary '", temporary_, "' into place"), errno);
  committed_ = true;
  // The rename is durable once the folder is: a crash now leaves the new file or the old
  // one, never a folder without either. A folder that cannot be synced (some network file
  // systems) has still seen the rename.
  const int folder = ::open(folder_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    fsync(folder);
    ::close(folder);
  }
  ::close(fd_);  // releases the lock, after the rename: the name never holds an unlocked temporary
  fd_ = -1;
}

void replace_file(const std::string& path, std::string_view bytes, mode_t mode) {
  FileReplacement file(path, mode);
  file.write(bytes);
  file.commit();
}

bool is_replacement_temporary(std::string_view name, std::string_view target_name) {
  if (name.size() != target_name.size() + kTemporaryMark.size() + kRandomLetters) return false;
  if (name.substr(0, target_name.size()) != target_name) return false;
  if (name.substr(target_name.size(), kTemporaryMark.size()) != kTemporaryMark) return false;
  const std::string_view letters = name.substr(target_name.size() + kTemporaryMark.size());
  return letters.find_first_not_of(std::string_view(kLetters, sizeof kLetters - 1)) == std::string_view::npos;
}

bool is_replacement_temporary_of(std::string_view name, const std::function<bool(std::string_view)>& owned) {
  const size_t mark = name.rfind(kTemporaryMark);
  return mark != std::string_view::npos && is_replacement_temporary(name, name.substr(0, mark)) &&
         owned(name.substr(0, mark));
}

size_t remove_abandoned_temporaries(const std::string& folder,
                                    const std::function<bool(std::string_view)>& is_temporary) {
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  DIR* listing = fdopendir(dir);
  if (listing == nullptr) {
    ::close(dir);
    return 0;
  }
  size_t removed = 0;
  while (const dirent* entry = readdir(listing)) {
    if (!is_temporary(entry->d_name)) continue;
    // O_NOFOLLOW: a symlink under such a name is nobody's temporary (and is left alone).
    const int fd = openat(dir, entry->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat info {};
    // Ours to judge only if it is a plain file of this user; a held lock is a live writer.
    const bool abandoned = fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_uid == geteuid() &&
                           flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (abandoned && unlinkat(dir, entry->d_name, 0) == 0) ++removed;
    ::close(fd);
  }
  closedir(listing);
  return removed;
}

}  // namespace mirrored
