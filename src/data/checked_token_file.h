#pragma once
// Private to data/: a token file opened once, described and validated through that open
// file (open_token_file's checks, every token within the vocabulary), and read through it
// afterwards: the tokens read are the ones that were checked, whatever becomes of the path
// (a file swapped or a symlink planted between the check and the reads changes nothing).
#include <memory>
#include <string>

#include "hdf5_rows.h"
#include "mirrored/data/token_file.h"

namespace mirrored::data::detail {

// `info` receives the description; the rows read /tokens of the same open file.
std::shared_ptr<const Hdf5Rows> open_checked_token_file(const std::string& path, TokenFileInfo& info);

}  // namespace mirrored::data::detail
