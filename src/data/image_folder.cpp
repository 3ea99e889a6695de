#include "image_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "mirrored/core/error.h"

namespace mirrored::data::detail {
namespace {

constexpr int kMaxDepth = 16;            // below a class folder
constexpr size_t kSkippedExamples = 5;

bool allowed_extension(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

struct Entry {
  std::string name;
  struct stat info {};
};

// The entries of `dir` but . and .., sorted by name, each lstat'ed (links not followed).
std::vector<Entry> list_directory(const std::string& dir) {
  struct CloseDir {
    void operator()(DIR* dir) const { closedir(dir); }
  };
  std::unique_ptr<DIR, CloseDir> handle(opendir(dir.c_str()));
  if (!handle) throw InputError(str_cat("cannot read the folder '", dir, "': ", std::strerror(errno)));
  std::vector<Entry> entries;
  while (const dirent* entry = readdir(handle.get())) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    Entry e{name, {}};
    if (lstat((dir + "/" + name).c_str(), &e.info) != 0)
      throw InputError(str_cat("cannot stat '", dir, "/", name, "': ", std::strerror(errno)));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return entries;
}

void skip(ImageFolder& folder, const std::string& relative, const char* why, bool symlink) {
  (symlink ? folder.symlinks : folder.other_files) += 1;
  if (folder.skipped_examples.size() < kSkippedExamples) folder.skipped_examples.push_back(str_cat(relative, ": ", why));
}

void walk_class(ImageFolder& folder, const std::string& dir, const std::string& relative, int label, int depth) {
  for (const Entry& entry : list_directory(dir)) {
    const std::string path = dir + "/" + entry.name, rel = relative + "/" + entry.name;
    if (S_ISLNK(entry.info.st_mode)) {
      skip(folder, rel, "symbolic link, not followed", true);
    } else if (S_ISDIR(entry.info.st_mode)) {
      if (depth >= kMaxDepth) throw InputError(str_cat("'", path, "': folders nested more than ", kMaxDepth, " deep"));
      walk_class(folder, path, rel, label, depth + 1);
    } else if (!S_ISREG(entry.info.st_mode)) {
      skip(folder, rel, "not a regular file", false);
    } else if (!allowed_extension(entry.name)) {
      skip(folder, rel, "not .jpg, .jpeg or .png", false);
    } else {
      folder.files.push_back({path, rel, label});
    }
  }
}

}  // namespace

ImageFolder scan_image_folder(const std::string& root) {
  struct stat info {};
  if (stat(root.c_str(), &info) != 0) throw InputError(str_cat("cannot open '", root, "': ", std::strerror(errno)));
  if (!S_ISDIR(info.st_mode))
    throw InputError(str_cat("'", root, "' is not a folder (expected one subfolder of images per class)"));
  ImageFolder folder;
  folder.root = root;
  std::vector<std::string> class_dirs;
  for (const Entry& entry : list_directory(root)) {
    if (S_ISLNK(entry.info.st_mode)) skip(folder, entry.name, "symbolic link, not followed", true);
    else if (S_ISDIR(entry.info.st_mode)) folder.classes.push_back(entry.name);
    else skip(folder, entry.name, "a file beside the class folders", false);
  }
  if (folder.classes.empty())
    throw InputError(str_cat("'", root, "' holds no subfolders: expected one subfolder of images per class"));
  for (size_t label = 0; label < folder.classes.size(); ++label) {
    walk_class(folder, root + "/" + folder.classes[label], folder.classes[label], static_cast<int>(label), 0);
  }
  return folder;
}

bool read_image_file(const std::string& path, std::vector<uint8_t>& bytes, std::string& why) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why = errno == ELOOP ? "symbolic link, not followed" : str_cat("cannot open: ", std::strerror(errno));
    return false;
  }
  struct stat info {};
  bool ok = fstat(fd, &info) == 0;
  if (!ok) why = str_cat("cannot stat: ", std::strerror(errno));
  else if (!S_ISREG(info.st_mode)) ok = false, why = "not a regular file";
  else if (info.st_size > kMaxImageFileBytes)
    ok = false, why = str_cat(info.st_size, " bytes, more than the ", kMaxImageFileBytes, " accepted");
  if (ok) {
    bytes.resize(static_cast<size_t>(info.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != bytes.size()) ok = false, why = str_cat("read ", got, " of ", bytes.size(), " bytes");
  }
  close(fd);
  return ok;
}

}  // namespace mirrored::data::detail
