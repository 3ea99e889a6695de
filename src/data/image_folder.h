#pragma once
// Private to data/: the files of an image folder (one subfolder per class), walked as data
// from strangers: symbolic links are never followed (lstat during the walk, O_NOFOLLOW on
// open), only regular files whose names end in an allow-listed extension (.jpg .jpeg .png,
// any case) are taken, the depth of the walk is bounded, and a file is read only up to a
// size bound. Order: classes sorted by name (label = position), files sorted by path.
#include <cstdint>
#include <string>
#include <vector>

namespace mirrored::data::detail {

struct ImageFile {
  std::string path;      // root / class / relative
  std::string relative;  // class / relative, for messages and the validation split
  int label = 0;
};

struct ImageFolder {
  std::string root;
  std::vector<std::string> classes;  // sorted; label i is classes[i]
  std::vector<ImageFile> files;      // sorted by class, then path within it
  int64_t symlinks = 0;              // entries skipped: symbolic links (not followed)
  int64_t other_files = 0;           // entries skipped: other names or kinds of file
  std::vector<std::string> skipped_examples;  // the first few of those, with the reason
};

// InputError when `root` is not a directory or holds no class subfolders.
ImageFolder scan_image_folder(const std::string& root);

// The whole file, refusing a symlink, anything but a regular file, and more than
// kMaxImageFileBytes; false with `why` set.
inline constexpr int64_t kMaxImageFileBytes = int64_t{256} << 20;
bool read_image_file(const std::string& path, std::vector<uint8_t>& bytes, std::string& why);

}  // namespace mirrored::data::detail
